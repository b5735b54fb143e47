//! The Rust errors as the native module raises them: an instance of the package's
//! `StepjournalError` subclass for the code (`stepjournal._errors.from_native(code, refusal,
//! message)`), the refusal named for a refusal. The codes are the library's ([`ErrorCode`],
//! [`RefusalCode`]): this module maps errors to them and defines none.

use std::fmt::Display;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use stepjournal::{Coded, ErrorCode, RefusalCode};

use crate::bridge::with_python;

/// The exception for `code` (and `refusal`) saying `message`, built by the package's Python.
fn raised(code: &str, refusal: Option<&str>, message: String) -> PyErr {
    let made = with_python(|py| {
        py.import("stepjournal._errors")
            .and_then(|m| m.getattr("from_native"))
            .and_then(|f| f.call1((code, refusal, message.as_str())))
            .map(PyErr::from_value)
    });
    match made {
        Some(Ok(exception)) => exception,
        // The package's Python is missing (the module loaded on its own), or the interpreter is
        // exiting: the code stays in the text.
        _ => PyRuntimeError::new_err(format!("{code}: {message}")),
    }
}

/// An error with a code and a message.
pub(crate) fn coded(code: ErrorCode, message: impl Display) -> PyErr {
    raised(code.as_str(), None, message.to_string())
}

/// A Rust error as the native module raises it: its code, its refusal's, and its message.
pub(crate) fn thrown<E: Coded + Display>(e: E) -> PyErr {
    let refusal = e.refusal();
    raised(e.code().as_str(), refusal.map(RefusalCode::as_str), e.to_string())
}

/// A Rust error as `(code, refusal, message)`, for reports that list failures.
pub(crate) fn parts<E: Coded + Display>(e: &E) -> (String, Option<String>, String) {
    (e.code().as_str().to_owned(), e.refusal().map(|r| r.as_str().to_owned()), e.to_string())
}

/// The library's lists of codes: `(errors, refusals)`, every [`ErrorCode`]'s text and every
/// [`RefusalCode`]'s, which the package's exception classes are tested against.
#[pyfunction]
pub(crate) fn error_codes() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        ErrorCode::ALL.iter().map(|c| c.as_str()).collect(),
        RefusalCode::ALL.iter().map(|c| c.as_str()).collect(),
    )
}
