//! The actor scopes: which variants each searches.

use super::variant::{ActorVariant, Setup};

/// An actor scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorScope {
    /// The tests' scope (debug build, a few minutes).
    Ci,
    /// The deep scope (release build).
    Deep,
}

impl ActorScope {
    /// The scope called `name` (`actors-ci`, `actors-deep`).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "actors-ci" => Some(ActorScope::Ci),
            "actors-deep" => Some(ActorScope::Deep),
            _ => None,
        }
    }

    /// Its variants.
    pub fn variants(self) -> Vec<ActorVariant> {
        let v = ActorVariant::new;
        match self {
            ActorScope::Ci => vec![
                v(Setup::CrashedUnsafe, &["r1", "r2"], 0, 1),
                v(Setup::CrashedSafe, &["r1", "o"], 60, 1),
                v(Setup::SuspendedApproval, &["r1", "o"], 0, 0),
                v(Setup::SuspendedClient, &["r1", "o"], 0, 0),
                v(Setup::Fresh, &["d", "r1"], 60, 1),
            ],
            ActorScope::Deep => {
                // Every setup with every pair of actors (two runtimes, the second's clock
                // ahead and behind; a runtime and the operator; the dropping runtime with a
                // runtime, and with the operator), time passing twice; then three casts of
                // three. (Without a plant a clock's skew changes only the times events are
                // stamped with, which no key reads: one skew per cast but the runtimes'.)
                let mut out = Vec::new();
                for setup in Setup::ALL {
                    out.push(v(setup, &["r1", "r2"], 60, 2));
                    out.push(v(setup, &["r1", "r2"], -60, 2));
                    for cast in [&["r1", "o"][..], &["d", "r1"], &["d", "o"]] {
                        out.push(v(setup, cast, 60, 2));
                    }
                }
                out.extend([
                    v(Setup::CrashedUnsafe, &["r1", "r2", "o"], 60, 2),
                    v(Setup::SuspendedApproval, &["r1", "r2", "o"], 60, 1),
                    v(Setup::Fresh, &["d", "r1", "o"], -60, 1),
                ]);
                out
            }
        }
    }

    /// What the scope covers, for a person.
    pub fn describe(self) -> String {
        let variants = self.variants();
        let names: Vec<String> = variants.iter().map(ToString::to_string).collect();
        format!("actor scope ({} variants): {}", variants.len(), names.join(", "))
    }
}
