//! The choice vector: the faults of one execution, in order, each with the entry after it.
//! Written as one line (`a3.lands>wake b0.2.abandon>stop`) and read back, so that an execution
//! the explorer prints can be replayed.

use std::fmt;
use std::str::FromStr;

use crate::{AppendFault, BodyFault, Fault, Landing, Reentry, Trigger};

use super::super::probe::Tail;

/// The faults an append can take on the memory store (a torn landing is a lost one there).
const APPEND_FAULTS: [AppendFault; 4] = [
    AppendFault::Crash(Landing::Lands),
    AppendFault::Crash(Landing::Lost),
    AppendFault::Fail { poisoned: false },
    AppendFault::Fail { poisoned: true },
];

/// The faults a body can take, at each of its points.
const BODY_FAULTS: [BodyFault; 3] = [BodyFault::Crash, BodyFault::Abandon, BodyFault::FailRun];

/// The points inside a body a fault fires at: before the tool runs, after its first action
/// (the output chunk, or the remote child's start), after its second (the effect, or the
/// child's `child_attached`), and just before its result.
const BODY_POINTS: [u32; 4] = [0, 1, 2, 3];

/// Every entry of FORMAT.md a session is entered through after a fault (the simulator turns an
/// entry the state does not admit into the nearest one it does: a refused `retry` into a
/// `wake`, a `from_checkpoint` with no checkpoint into a `wake`).
const ENTRIES: [Reentry; 9] = Reentry::ALL;

/// What a fault at one depth of an execution may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Menu {
    /// At an append.
    pub appends: &'static [AppendFault],
    /// Inside a body.
    pub bodies: &'static [BodyFault],
    /// At these points of a body.
    pub points: &'static [u32],
    /// The entries after it.
    pub entries: &'static [Reentry],
}

impl Menu {
    /// Every fault at every place, every entry after it.
    pub const FULL: Menu = Menu {
        appends: &APPEND_FAULTS,
        bodies: &BODY_FAULTS,
        points: &BODY_POINTS,
        entries: &ENTRIES,
    };

    /// Crashes only (at an append, the batch landed or lost; inside a body, before or after
    /// its effect), followed by a `wake` or a `stop`.
    pub const CRASHES: Menu = Menu {
        appends: &[AppendFault::Crash(Landing::Lands), AppendFault::Crash(Landing::Lost)],
        bodies: &[BodyFault::Crash],
        points: &[1, 2],
        entries: &[Reentry::Wake, Reentry::Stop],
    };

    /// What the menu holds, for a person.
    pub fn describe(&self) -> String {
        if *self == Menu::FULL {
            "any fault anywhere, any entry".to_owned()
        } else if *self == Menu::CRASHES {
            "a crash (at an append, or in a body before or after its effect), then wake or stop"
                .to_owned()
        } else {
            format!("{self:?}")
        }
    }
}

/// The faults one execution of a variant may take: the menu of the `k`-th fault is
/// `menus[k]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The variant.
    pub variant: super::Variant,
    /// One menu per fault; as many faults at most.
    pub menus: Vec<Menu>,
}

/// One execution's faults, in the order they fire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choices(pub Vec<Fault>);

impl Choices {
    /// The executions one fault longer, whose next fault fires at one of the places `tail`
    /// counted (every append and every point of every body after the last fault), followed
    /// by each entry.
    pub(crate) fn children(&self, tail: Tail, menu: &Menu) -> Vec<Choices> {
        let mut triggers = Vec::new();
        for n in 0..tail.appends {
            triggers.extend(menu.appends.iter().map(|&fault| Trigger::Append { n, fault }));
        }
        for n in 0..tail.bodies {
            for &point in menu.points {
                triggers.extend(menu.bodies.iter().map(|&fault| Trigger::Body { n, point, fault }));
            }
        }
        let mut out = Vec::with_capacity(triggers.len() * menu.entries.len());
        for trigger in triggers {
            for &then in menu.entries {
                let mut next = self.0.clone();
                next.push(Fault::new(trigger).then(then));
                out.push(Choices(next));
            }
        }
        out
    }
}

fn landing_str(fault: AppendFault) -> &'static str {
    match fault {
        AppendFault::Crash(Landing::Lands) => "lands",
        AppendFault::Crash(Landing::Lost) => "lost",
        AppendFault::Crash(Landing::Torn) => "torn",
        AppendFault::Fail { poisoned: false } => "fail",
        AppendFault::Fail { poisoned: true } => "poison",
    }
}

fn body_str(fault: BodyFault) -> &'static str {
    match fault {
        BodyFault::Crash => "crash",
        BodyFault::Abandon => "abandon",
        BodyFault::FailRun => "failrun",
    }
}

fn entry_str(entry: Reentry) -> &'static str {
    match entry {
        Reentry::Wake => "wake",
        Reentry::Continue => "continue",
        Reentry::FromCheckpoint => "from_checkpoint",
        Reentry::Retry => "retry",
        Reentry::RetryWithMessage => "retry_message",
        Reentry::RetryFromCheckpoint => "retry_checkpoint",
        Reentry::WithMessage => "with_message",
        Reentry::NewTurn => "new_turn",
        Reentry::Stop => "stop",
    }
}

impl fmt::Display for Choices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for (i, fault) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            match fault.trigger {
                Trigger::Append { n, fault } => write!(f, "a{n}.{}", landing_str(fault))?,
                Trigger::Body { n, point, fault } => write!(f, "b{n}.{point}.{}", body_str(fault))?,
            }
            write!(f, ">{}", entry_str(fault.then))?;
        }
        Ok(())
    }
}

/// A choice vector's text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a choice vector ({why}); the form is `-` (no fault) or faults separated by \
     spaces, each aN.{{lands,lost,torn,fail,poison}}>ENTRY or bN.P.{{crash,abandon,failrun}}>ENTRY"
)]
pub struct ChoicesError {
    text: String,
    why: String,
}

fn parse_fault(s: &str) -> Result<Fault, String> {
    let (trigger, then) = s.split_once('>').ok_or(format!("`{s}` has no `>ENTRY`"))?;
    let then = ENTRIES
        .into_iter()
        .find(|e| entry_str(*e) == then)
        .ok_or(format!("`{then}` is not an entry"))?;
    let number = |t: &str| t.parse::<u32>().map_err(|_| format!("`{t}` is not a number"));
    let trigger = if let Some(rest) = trigger.strip_prefix('a') {
        let (n, what) = rest.split_once('.').ok_or(format!("`{trigger}` is not aN.WHAT"))?;
        let fault = APPEND_FAULTS
            .into_iter()
            .chain([AppendFault::Crash(Landing::Torn)])
            .find(|f| landing_str(*f) == what)
            .ok_or(format!("`{what}` is not an append fault"))?;
        Trigger::Append { n: number(n)?, fault }
    } else if let Some(rest) = trigger.strip_prefix('b') {
        let mut parts = rest.split('.');
        let (Some(n), Some(point), Some(what), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("`{trigger}` is not bN.P.WHAT"));
        };
        let fault = BODY_FAULTS
            .into_iter()
            .find(|f| body_str(*f) == what)
            .ok_or(format!("`{what}` is not a body fault"))?;
        Trigger::Body { n: number(n)?, point: number(point)?, fault }
    } else {
        return Err(format!("`{trigger}` begins with neither `a` nor `b`"));
    };
    Ok(Fault::new(trigger).then(then))
}

impl FromStr for Choices {
    type Err = ChoicesError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text == "-" || text.is_empty() {
            return Ok(Choices::default());
        }
        let faults = text
            .split_whitespace()
            .map(parse_fault)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| ChoicesError { text: text.to_owned(), why })?;
        Ok(Choices(faults))
    }
}
