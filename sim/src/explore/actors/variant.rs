//! An actor variant: where the session stands when the actors start, which actors there are,
//! how far the clocks of all but the first runtime are from the store's, and how many times
//! time may pass. Written as one line (`crashed-unsafe/r1+r2+o/skew+60/t2`) and read back.

use std::fmt;
use std::str::FromStr;

use super::actor::Role;

/// Where the session stands when the actors start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setup {
    /// No session yet (a runtime serving a new turn makes it).
    Fresh,
    /// A run crashed after the body of its unsafe call started (its lease lapsed).
    CrashedUnsafe,
    /// A run crashed after the body of its safe call started (its lease lapsed).
    CrashedSafe,
    /// A run crashed after saving a reply whose call never started.
    CrashedSaved,
    /// A run suspended waiting for a client's answer.
    SuspendedClient,
    /// A run suspended waiting for an approval.
    SuspendedApproval,
}

impl Setup {
    /// Every setup.
    pub const ALL: [Setup; 6] = [
        Setup::Fresh,
        Setup::CrashedUnsafe,
        Setup::CrashedSafe,
        Setup::CrashedSaved,
        Setup::SuspendedClient,
        Setup::SuspendedApproval,
    ];

    /// Its name in a variant's line.
    pub fn as_str(self) -> &'static str {
        match self {
            Setup::Fresh => "fresh",
            Setup::CrashedUnsafe => "crashed-unsafe",
            Setup::CrashedSafe => "crashed-safe",
            Setup::CrashedSaved => "crashed-saved",
            Setup::SuspendedClient => "suspended-client",
            Setup::SuspendedApproval => "suspended-approval",
        }
    }
}

/// One actor of a variant: its role and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cast {
    /// What it is.
    pub role: Role,
    /// Its name: `r1`, `r2` (runtimes), `o` (the operator), `d` (the runtime whose futures are
    /// dropped).
    pub name: &'static str,
}

const CASTS: [Cast; 4] = [
    Cast { role: Role::Runtime, name: "r1" },
    Cast { role: Role::Runtime, name: "r2" },
    Cast { role: Role::Operator, name: "o" },
    Cast { role: Role::Dropper, name: "d" },
];

/// An actor variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActorVariant {
    /// Where the session stands at the start.
    pub setup: Setup,
    /// The actors, in their order.
    pub cast: Vec<Cast>,
    /// How far every actor's clock but the first's is from the store's, ms (positive: ahead).
    pub skew: i64,
    /// How many times time may pass (each time by a little more than half a lease).
    pub ticks: u32,
}

impl ActorVariant {
    /// A variant of `setup` with the actors named in `names` (`r1`, `r2`, `o`, `d`).
    pub fn new(setup: Setup, names: &[&str], skew: i64, ticks: u32) -> Self {
        let cast = names.iter().filter_map(|n| CASTS.iter().find(|c| c.name == *n)).copied();
        ActorVariant { setup, cast: cast.collect(), skew, ticks }
    }
}

impl fmt::Display for ActorVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.cast.iter().map(|c| c.name).collect();
        write!(f, "{}/{}/skew{:+}/t{}", self.setup.as_str(), names.join("+"), self.skew, self.ticks)
    }
}

/// A variant's text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not an actor variant ({why}); the form is SETUP/ACTORS/skew±MS/tN, e.g. \
     crashed-unsafe/r1+r2+o/skew+60/t2, SETUP one of fresh, crashed-unsafe, crashed-safe, \
     crashed-saved, suspended-client, suspended-approval, ACTORS of r1, r2, o, d joined by +"
)]
pub struct ActorVariantError {
    text: String,
    why: String,
}

impl FromStr for ActorVariant {
    type Err = ActorVariantError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |why: String| ActorVariantError { text: text.to_owned(), why };
        let parts: Vec<&str> = text.trim().split('/').collect();
        let [setup, actors, skew, ticks] = parts.as_slice() else {
            return Err(fail("it has not four parts".to_owned()));
        };
        let setup = Setup::ALL
            .into_iter()
            .find(|s| s.as_str() == *setup)
            .ok_or_else(|| fail(format!("`{setup}` is not a setup")))?;
        let mut cast = Vec::new();
        for name in actors.split('+') {
            let found = CASTS.iter().find(|c| c.name == name);
            let found = found.ok_or_else(|| fail(format!("`{name}` is not an actor")))?;
            if cast.contains(found) {
                return Err(fail(format!("`{name}` is named twice")));
            }
            cast.push(*found);
        }
        let skew = skew
            .strip_prefix("skew")
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| fail(format!("`{skew}` is not skew±MS")))?;
        let ticks = ticks
            .strip_prefix('t')
            .and_then(|t| t.parse::<u32>().ok())
            .ok_or_else(|| fail(format!("`{ticks}` is not tN")))?;
        Ok(ActorVariant { setup, cast, skew, ticks })
    }
}
