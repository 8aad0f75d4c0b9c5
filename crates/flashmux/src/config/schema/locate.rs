//! Where a key is in the scenario file, so that an error names its line as well as its key.
//!
//! Every error of the loader starts with the key it is about (`device.capacity: ...`,
//! `tenant[2] (db).region: ...`, `host.cfq: ...`). [`Lines::of_key`] reads that key back
//! from the message and looks it up in the parsed document (`toml_edit` keeps each key's byte
//! span): a key given in the file gets the line it is on; a table gets the line of its header.
//! A key the file does not give (the error is about its default) has no line: the error then
//! names the file and the key only, as a guess would mislead.
//!
//! Worked example: in
//! ```toml
//! [device]
//! preset = "tlc-nvme"
//!
//! [[tenant]]
//! name = "db"
//! region = { offset = "0", size = "1PiB" }
//! ```
//! the message `tenant[0] (db).region: ...` is about `tenant` → item 0 → `region`, on line 6:
//! the error reads `scenario.toml:6: tenant[0] (db).region: ...`.

use toml_edit::{ImDocument, Item, Key, Table, Value};

/// A scenario file's text with its keys' positions.
pub(super) struct Lines<'a> {
    text: &'a str,
    doc: Option<ImDocument<&'a str>>,
}

/// One step of a key path: a key, or an index into an array (of tables).
#[derive(Debug, PartialEq)]
enum Step<'m> {
    Key(&'m str),
    Index(usize),
}

impl<'a> Lines<'a> {
    /// `text`'s keys. Text that does not parse has none (its syntax error carries its own line).
    pub(super) fn new(text: &'a str) -> Lines<'a> {
        Lines { text, doc: ImDocument::parse(text).ok() }
    }

    /// No positions: for generated text, whose lines are nobody's.
    pub(super) fn none() -> Lines<'static> {
        Lines { text: "", doc: None }
    }

    /// The 1-based line of byte `offset` (none for generated text).
    pub(super) fn line_at(&self, offset: usize) -> Option<usize> {
        self.doc.as_ref()?;
        let end = offset.min(self.text.len());
        Some(self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1)
    }

    /// The line of the key `text` starts with — an error message (`tenant[0] (db).region: ...`)
    /// or serde's key path (`tenant[0].region`) — if the file gives that key.
    pub(super) fn of_key(&self, text: &str) -> Option<usize> {
        let doc = self.doc.as_ref()?;
        let steps = leading_path(text)?;
        span_of(doc.as_table(), &steps).and_then(|at| self.line_at(at))
    }
}

/// The key path a message starts with: `a.b[2].c`, where an index may be followed by the
/// tenant's name in parentheses (`tenant[2] (db).region`). `None` if the message does not start
/// with one.
fn leading_path(message: &str) -> Option<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    let mut rest = message;
    loop {
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        steps.push(Step::Key(&rest[..end]));
        rest = &rest[end..];
        while let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            steps.push(Step::Index(r[..close].parse().ok()?));
            rest = &r[close + 1..];
            // `tenant[2] (db)`: the tenant's name, which names may hold any character but ')'.
            if let Some(r) = rest.strip_prefix(" (") {
                rest = &r[r.find(')')? + 1..];
            }
        }
        match rest.strip_prefix('.') {
            Some(r) => rest = r,
            None => return Some(steps),
        }
    }
}

/// The byte offset of the key at `steps` under `table`: the key's own span, or for a table
/// reached through an index, its header's.
fn span_of(table: &Table, steps: &[Step]) -> Option<usize> {
    let (Step::Key(k), rest) = steps.split_first()? else { return None };
    let item = table.get(k)?;
    let here = || table.key(k).and_then(Key::span).or_else(|| item.span()).map(|s| s.start);
    match rest.first() {
        None => here(),
        Some(Step::Index(i)) => {
            let at = match item {
                Item::ArrayOfTables(a) => {
                    let t = a.get(*i)?;
                    return if rest.len() == 1 { t.span().map(|s| s.start) } else { span_of(t, &rest[1..]) };
                }
                Item::Value(Value::Array(a)) => a.get(*i)?,
                _ => return None,
            };
            if rest.len() == 1 {
                at.span().map(|s| s.start)
            } else {
                match at {
                    Value::InlineTable(t) => span_in_inline(t, &rest[1..]),
                    _ => None,
                }
            }
        }
        Some(Step::Key(_)) => match item {
            Item::Table(t) => span_of(t, rest),
            Item::Value(Value::InlineTable(t)) => span_in_inline(t, rest),
            _ => None,
        },
    }
}

fn span_in_inline(table: &toml_edit::InlineTable, steps: &[Step]) -> Option<usize> {
    let (Step::Key(k), rest) = steps.split_first()? else { return None };
    let value = table.get(k)?;
    match rest.first() {
        None => table.key(k).and_then(Key::span).or_else(|| value.span()).map(|s| s.start),
        Some(Step::Key(_)) => match value {
            Value::InlineTable(t) => span_in_inline(t, rest),
            _ => None,
        },
        Some(Step::Index(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name = \"x\"\n[device]\npreset = \"tlc-nvme\"\ncapacity = \"1GiB\"\n\n[device.ftl.cmt]\npages = 4\n\n[[tenant]]\nname = \"a\"\n\n[[tenant]]\nname = \"db\"\nregion = { offset = \"0\", size = \"1PiB\" }\nfio = \"\"\"\n[j]\nrw=read\n\"\"\"\n";

    #[test]
    fn a_key_given_in_the_file_has_its_line() {
        let l = Lines::new(TEXT);
        assert_eq!(l.of_key("device.capacity: invalid size"), Some(4));
        assert_eq!(l.of_key("device: the drive is too small"), Some(2));
        assert_eq!(l.of_key("device.ftl.cmt.pages: too small"), Some(7));
        assert_eq!(l.of_key("device.ftl.cmt: size and pages"), Some(6));
        assert_eq!(l.of_key("name: x"), Some(1));
        assert_eq!(l.of_key("device.preset"), Some(3));
    }

    #[test]
    fn tenants_are_found_by_index_with_or_without_their_name() {
        let l = Lines::new(TEXT);
        assert_eq!(l.of_key("tenant[0] (a): no workload"), Some(9));
        assert_eq!(l.of_key("tenant[1] (db).region: beyond the drive"), Some(14));
        assert_eq!(l.of_key("tenant[1] (a) b).region: x"), Some(12), "a name with ')' ends early: the tenant's line");
        assert_eq!(l.of_key("tenant[1].region.size"), Some(14));
        assert_eq!(l.of_key("tenant[1].fio"), Some(15));
        assert_eq!(l.of_key("tenant[1]"), Some(12));
    }

    #[test]
    fn keys_the_file_does_not_give_have_no_line() {
        let l = Lines::new(TEXT);
        assert_eq!(l.of_key("device.ftl.cmt.size: a cache of 3 pages"), None);
        assert_eq!(l.of_key("host.scheduler: 'hwabc' needs"), None);
        assert_eq!(l.of_key("tenant[2] (c): x"), None);
        assert_eq!(l.of_key("the job file has no job sections"), None);
        assert_eq!(l.of_key(": nothing"), None);
        assert_eq!(Lines::none().of_key("device.capacity: x"), None);
        assert_eq!(Lines::new("[device\n").of_key("device: x"), None, "text that does not parse");
    }

    #[test]
    fn paths_are_read_from_the_front_of_the_message() {
        use Step::*;
        assert_eq!(leading_path("virt.aio = \"threads\": x"), Some(vec![Key("virt"), Key("aio")]));
        assert_eq!(leading_path("a.b and c.d both"), Some(vec![Key("a"), Key("b")]));
        assert_eq!(leading_path("tenant[3] (t 3).trace.path: x"), Some(vec![Key("tenant"), Index(3), Key("trace"), Key("path")]));
        assert_eq!(leading_path("tenant[x]: y"), None);
        assert_eq!(leading_path("tenant[3"), None);
    }
}
