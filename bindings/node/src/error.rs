//! The Rust errors as the native module throws them: a plain error whose message is
//! `SJ:<code>:<message>`, or `SJ:refused/<refusal>:<message>` for a refusal; `lib/errors.js`
//! turns them into `StepjournalError`s. The codes are the library's ([`ErrorCode`],
//! [`RefusalCode`]): this module maps errors to them and defines none.

use std::fmt::Display;

use napi_derive::napi;
use stepjournal::{Coded, ErrorCode, RefusalCode};

/// An error with a code and the Rust message, as the native module throws it.
pub(crate) fn coded(code: ErrorCode, message: impl Display) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, format!("SJ:{code}:{message}"))
}

/// A Rust error as the native module throws it: its code (with its refusal's after a slash) and
/// its message.
pub(crate) fn thrown<E: Coded + Display>(e: E) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, coded_text(&e))
}

/// A Rust error's text as the native module throws it: `SJ:<code>[/<refusal>]:<message>`.
pub(crate) fn coded_text<E: Coded + Display>(e: &E) -> String {
    let code = match e.refusal() {
        Some(refusal) => format!("{}/{refusal}", e.code()),
        None => e.code().to_string(),
    };
    format!("SJ:{code}:{e}")
}

/// Every error code the engine can throw, and every refusal code: the lists `index.d.ts`'s
/// `ErrorCode` and `RefusalCode` types are tested against.
#[napi(object)]
#[derive(Debug)]
pub struct Codes {
    /// Every [`ErrorCode`]'s text.
    pub errors: Vec<String>,
    /// Every [`RefusalCode`]'s text.
    pub refusals: Vec<String>,
}

/// The library's lists of codes.
#[napi]
pub fn error_codes() -> Codes {
    Codes {
        errors: ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
        refusals: RefusalCode::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
    }
}
