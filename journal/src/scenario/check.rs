//! FORMAT.md's "What a checker compares": a plan's JSON against a scenario's `expect`.

use serde_json::{Map, Value};

/// A scenario whose `expect` cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The scenario text is not JSON.
    #[error("the scenario is not valid JSON: {source}")]
    NotJson {
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The scenario has no `expect` object.
    #[error("the scenario has no `expect` object")]
    NoExpect,
}

/// A scenario's `expect` member, for checkers (the plan never reads it).
pub fn expect_of(scenario_text: &str) -> Result<Value, CheckError> {
    let top: Value =
        serde_json::from_str(scenario_text).map_err(|source| CheckError::NotJson { source })?;
    match top.get("expect") {
        Some(expect @ Value::Object(_)) => Ok(expect.clone()),
        _ => Err(CheckError::NoExpect),
    }
}

fn members<'a>(
    value: &'a Value,
    what: &str,
    out: &mut Vec<String>,
) -> Option<&'a Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        other => {
            out.push(format!("{what} must be an object, found {other}"));
            None
        }
    }
}

/// Compares a plan (its JSON form) with a scenario's `expect`, as FORMAT.md says a checker does:
/// `error` (`null` or `"validation_error"`), `calls` (exactly these call ids, each entry having
/// the members given), `appends` (the list of `type`s, exactly, in order) and, when present,
/// `paired` (call id to the members its `paired` append must have). Returns one sentence per
/// difference; empty when the plan passes.
pub fn check(plan: &Value, expect: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(expect) = members(expect, "`expect`", &mut out) else {
        return out;
    };

    let plan_error = match plan.get("error") {
        Some(Value::Null) | None => Value::Null,
        Some(e) => e.get("kind").cloned().unwrap_or(Value::Null),
    };
    match expect.get("error") {
        Some(want) if *want == plan_error => {}
        Some(want) => out.push(format!("error: expected {want}, the plan has {plan_error}")),
        None => out.push("`expect` has no `error`".to_owned()),
    }

    let plan_calls: Vec<&Value> =
        plan.get("calls").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    match expect.get("calls") {
        None => out.push("`expect` has no `calls`".to_owned()),
        Some(want) => {
            if let Some(want) = members(want, "`expect.calls`", &mut out) {
                let ids: Vec<&str> = plan_calls
                    .iter()
                    .filter_map(|c| c.get("call").and_then(Value::as_str))
                    .collect();
                let mut want_ids: Vec<&str> = want.keys().map(String::as_str).collect();
                let mut got_ids = ids.clone();
                want_ids.sort_unstable();
                got_ids.sort_unstable();
                if want_ids != got_ids {
                    out.push(format!("calls: expected exactly {want_ids:?}, the plan has {ids:?}"));
                }
                for (id, want_members) in want {
                    let Some(got) = plan_calls
                        .iter()
                        .find(|c| c.get("call").and_then(Value::as_str) == Some(id))
                    else {
                        continue;
                    };
                    compare_members(&format!("call `{id}`"), want_members, got, &mut out);
                }
            }
        }
    }

    let plan_appends: Vec<&Value> = plan
        .get("appends")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let types: Vec<&str> =
        plan_appends.iter().map(|e| e.get("type").and_then(Value::as_str).unwrap_or("?")).collect();
    match expect.get("appends").and_then(Value::as_array) {
        None => out.push("`expect` has no `appends` list".to_owned()),
        Some(want) => {
            let want: Vec<&str> = want.iter().map(|t| t.as_str().unwrap_or("?")).collect();
            if want != types {
                out.push(format!("appends: expected {want:?}, the plan has {types:?}"));
            }
        }
    }

    if let Some(paired) = expect.get("paired")
        && let Some(paired) = members(paired, "`expect.paired`", &mut out)
    {
        for (id, want_members) in paired {
            let found: Vec<&&Value> = plan_appends
                .iter()
                .filter(|e| {
                    e.get("type").and_then(Value::as_str) == Some("paired")
                        && e.get("call").and_then(Value::as_str) == Some(id)
                })
                .collect();
            match found.as_slice() {
                [] => out.push(format!("paired: the plan appends no `paired` for `{id}`")),
                [one] => {
                    compare_members(&format!("the `paired` of `{id}`"), want_members, one, &mut out)
                }
                _ => out
                    .push(format!("paired: the plan appends {} `paired` for `{id}`", found.len())),
            }
        }
    }
    out
}

fn compare_members(what: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    let Some(want) = members(want, what, out) else {
        return;
    };
    for (member, value) in want {
        match got.get(member) {
            Some(g) if g == value => {}
            Some(g) => out.push(format!("{what}: `{member}` expected {value}, the plan has {g}")),
            None => out.push(format!("{what}: `{member}` expected {value}, the plan has none")),
        }
    }
}
