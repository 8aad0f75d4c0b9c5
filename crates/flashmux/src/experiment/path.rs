//! Dotted key paths into a TOML document: `device.ftl.overprovisioning`, `tenant.1.fio`.

use toml::Value;

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A table key (bare-key characters: letters, digits, `_`, `-`).
    Key(String),
    /// A table key that is also a valid array index: which one it is depends on the value met.
    Index(usize, String),
}

impl Step {
    fn text(&self) -> &str {
        match self {
            Step::Key(k) | Step::Index(_, k) => k,
        }
    }
}

/// Splits a dotted key path into its steps. Components are TOML bare keys; quoted keys (keys
/// containing dots, spaces, ...) are not supported.
pub fn parse_path(key: &str) -> Result<Vec<Step>, String> {
    if key.trim().is_empty() {
        return Err("the key is empty".into());
    }
    key.split('.')
        .map(|part| {
            if part.is_empty() {
                return Err("empty component (two dots in a row, or a leading or trailing dot)".into());
            }
            if let Some(c) = part.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
                return Err(format!(
                    "component '{part}' has the character {c:?}: components are bare TOML keys (letters, digits, '_', '-') or array indices"
                ));
            }
            Ok(match part.parse::<usize>() {
                Ok(i) if part.bytes().all(|b| b.is_ascii_digit()) => Step::Index(i, part.to_string()),
                _ => Step::Key(part.to_string()),
            })
        })
        .collect()
}

/// What a TOML value is, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// Sets the value at `key` in `root` (a table), replacing what was there. Missing tables on the
/// way are created; arrays are indexed by number (`tenant.1.fio`), and an index past an array's
/// end is an error, as is a path that goes through a value that is neither a table nor an array.
pub fn set_path(root: &mut Value, key: &str, value: Value) -> Result<(), String> {
    let steps = parse_path(key)?;
    let mut cur = root;
    let mut walked = String::new();
    for step in &steps {
        cur = slot(cur, step, &walked)?;
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(step.text());
    }
    *cur = value;
    Ok(())
}

/// The value `step` names inside `cur` (`walked` is the path to `cur`, for messages); a missing
/// table key is created as an empty table (to be filled or replaced by the caller).
fn slot<'a>(cur: &'a mut Value, step: &Step, walked: &str) -> Result<&'a mut Value, String> {
    let here = if walked.is_empty() { "the document".to_string() } else { format!("'{walked}'") };
    match cur {
        Value::Table(t) => Ok(t.entry(step.text().to_string()).or_insert_with(|| Value::Table(toml::map::Map::new()))),
        Value::Array(a) => {
            let Step::Index(idx, _) = step else {
                return Err(format!("{here} is an array: expected an index after it, not '{}'", step.text()));
            };
            let len = a.len();
            a.get_mut(*idx).ok_or_else(|| {
                format!("index {idx} is past the end of {here} ({len} element{})", if len == 1 { "" } else { "s" })
            })
        }
        other => Err(format!("{here} is {}, not a table or an array", kind(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Value {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn sets_nested_keys_and_creates_tables() {
        let mut v = doc("seed = 1\n[device]\npreset = \"null\"\n");
        set_path(&mut v, "seed", Value::Integer(7)).unwrap();
        set_path(&mut v, "device.preset", Value::String("paper-c".into())).unwrap();
        set_path(&mut v, "device.ftl.overprovisioning", Value::Float(0.25)).unwrap();
        set_path(&mut v, "stop.time", Value::String("1s".into())).unwrap();
        assert_eq!(v, doc("seed = 7\n[device]\npreset = \"paper-c\"\n[device.ftl]\noverprovisioning = 0.25\n[stop]\ntime = \"1s\"\n"));
    }

    #[test]
    fn indexes_arrays() {
        let mut v = doc("[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"b\"\n");
        set_path(&mut v, "tenant.1.fio", Value::String("[j]\nrw=read\n".into())).unwrap();
        set_path(&mut v, "tenant.0.region.size", Value::String("50%".into())).unwrap();
        assert_eq!(v["tenant"][1]["fio"].as_str(), Some("[j]\nrw=read\n"));
        assert_eq!(v["tenant"][0]["region"]["size"].as_str(), Some("50%"));
        // A whole element can be replaced.
        set_path(&mut v, "tenant.0", doc("name = \"c\"").clone()).unwrap();
        assert_eq!(v["tenant"][0]["name"].as_str(), Some("c"));
        // Digits are keys in tables.
        set_path(&mut v, "x.0", Value::Boolean(true)).unwrap();
        assert_eq!(v["x"]["0"].as_bool(), Some(true));
    }

    #[test]
    fn errors_name_the_problem() {
        let mut v = doc("seed = 1\n[[tenant]]\nname = \"a\"\n");
        let e = set_path(&mut v, "tenant.1.fio", Value::Integer(1)).unwrap_err();
        assert_eq!(e, "index 1 is past the end of 'tenant' (1 element)");
        let e = set_path(&mut v, "tenant.name", Value::Integer(1)).unwrap_err();
        assert_eq!(e, "'tenant' is an array: expected an index after it, not 'name'");
        let e = set_path(&mut v, "seed.x", Value::Integer(1)).unwrap_err();
        assert_eq!(e, "'seed' is an integer, not a table or an array");
        assert!(set_path(&mut v, "", Value::Integer(1)).unwrap_err().contains("empty"));
        assert!(set_path(&mut v, "device..ftl", Value::Integer(1)).unwrap_err().contains("empty component"));
        assert!(set_path(&mut v, "device.", Value::Integer(1)).unwrap_err().contains("empty component"));
        assert!(set_path(&mut v, "a b", Value::Integer(1)).unwrap_err().contains("bare TOML keys"));
        assert!(set_path(&mut v, "\"a.b\"", Value::Integer(1)).unwrap_err().contains("bare TOML keys"));
        // Failed attempts change nothing.
        assert_eq!(v["seed"].as_integer(), Some(1));
    }
}
