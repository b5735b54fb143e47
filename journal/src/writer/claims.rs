//! One journal per store in a process: a second journal over a store another journal of the
//! process runs over would take that one's live runs for crashed ones (they are not its own)
//! and recover them under it, mid-body. [`claim`] refuses it; the claim goes with the first
//! journal's last clone.

use std::any::Any;
use std::sync::{Mutex, Weak};

use stepjournal_backends::StoreIdentity;

/// What holds a claim: a journal's shared state, held weakly (a claim whose journal is gone is
/// free).
pub(crate) type Holder = Weak<dyn Any + Send + Sync>;

/// The stores journals of this process run over, each with its holder.
static CLAIMS: Mutex<Vec<(StoreIdentity, Holder)>> = Mutex::new(Vec::new());

/// Claims `store` for `holder`; refused while another live holder has it. A handle standing
/// for a process of its own ([`StoreIdentity::OwnProcess`]) claims nothing.
pub(crate) fn claim(store: &StoreIdentity, holder: Holder) -> Result<(), StoreIdentity> {
    if *store == StoreIdentity::OwnProcess {
        return Ok(());
    }
    let mut claims = CLAIMS.lock().unwrap_or_else(|p| p.into_inner());
    claims.retain(|(_, holder)| holder.strong_count() > 0);
    if claims.iter().any(|(held, _)| held == store) {
        return Err(store.clone());
    }
    claims.push((store.clone(), holder));
    Ok(())
}

/// Lets go of `store`'s claim held by the holder at `at` (its journal is gone).
pub(crate) fn release(store: &StoreIdentity, at: *const ()) {
    let mut claims = CLAIMS.lock().unwrap_or_else(|p| p.into_inner());
    claims.retain(|(held, holder)| !(held == store && std::ptr::eq(holder.as_ptr().cast(), at)));
}
