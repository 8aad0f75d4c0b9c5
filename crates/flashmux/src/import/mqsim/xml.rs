//! Reading MQSim's XML files: the document, its parameter sets (an element whose children are
//! `<Name>value</Name>` parameters), each parameter's line, and its value parsed as MQSim's own
//! parser reads it (`exec/*_Parameter_Set.cpp`: enumerations and booleans upper-cased before they
//! are compared; a boolean is false only when it reads FALSE), but strictly: a value MQSim would
//! read in part (`12abc` as 12, `yes` as true) is an error here, with its line.
//!
//! MQSim ignores elements it does not know (its parsers compare each child's name with the ones
//! they read and skip the rest), so an unknown element is a warning, not an error, and a
//! parameter given twice takes the last value, as in MQSim, with a warning.

use crate::import::ImportError;
use roxmltree::{Document, Node};
use std::collections::BTreeMap;

/// Where a parameter is: its file, its line (none when it is not given and MQSim's default
/// applies) and its element's name.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Loc {
    pub file: String,
    pub line: Option<u32>,
    pub element: String,
}

impl Loc {
    pub fn new(file: &str, line: Option<u32>, element: &str) -> Loc {
        Loc { file: file.to_string(), line, element: element.to_string() }
    }

    pub fn err(&self, message: impl Into<String>) -> ImportError {
        ImportError { file: self.file.clone(), line: self.line, element: self.element.clone(), message: message.into() }
    }

    /// A warning's text (without the `warning: ` the command line puts before it).
    pub fn warning(&self, message: &str) -> String {
        self.err(message).to_string()
    }
}

/// A parameter's value and where it came from.
#[derive(Clone, Debug)]
pub(super) struct Val<T> {
    pub v: T,
    pub loc: Loc,
    /// Whether the file gives it (else it is MQSim's default).
    pub given: bool,
}

/// An element's line (1-based).
pub(super) fn line_of(doc: &Document, node: Node) -> u32 {
    doc.text_pos_at(node.range().start).row
}

/// Parses `text` (from `file`); an error names the line and column XML's rules were broken at.
pub(super) fn parse<'t>(file: &str, text: &'t str) -> Result<Document<'t>, ImportError> {
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    Document::parse_with_options(text, opts).map_err(|e| {
        let pos = e.pos();
        Loc::new(file, Some(pos.row), "XML").err(format!("not well-formed XML: {e}"))
    })
}

/// The root element, which must be `root`.
pub(super) fn root<'a, 'i>(
    file: &str,
    doc: &'a Document<'i>,
    root: &str,
    what: &str,
) -> Result<Node<'a, 'i>, ImportError> {
    let r = doc.root_element();
    if r.tag_name().name() == root {
        return Ok(r);
    }
    Err(Loc::new(file, Some(line_of(doc, r)), r.tag_name().name()).err(format!(
        "expected the root element <{root}> of {what} (MQSim would print an error and run its built-in defaults instead)"
    )))
}

/// The parameters of one parameter set, by name, with their lines.
pub(super) struct Params {
    file: String,
    given: BTreeMap<String, (String, u32)>,
}

/// Names MQSim's parser reads under another spelling, with what to say about them.
const MISSPELLED: &[(&str, &str)] = &[(
    "Preferred_suspend_erase_time_for_read",
    "MQSim reads this parameter as 'Prefered_suspend_erase_time_for_read' (one r) and ignores this spelling: its default (700000 ns) applies",
)];

impl Params {
    /// The parameters among `node`'s children: `known` are read, `nested` (parameter sets inside
    /// this one) are left to the caller, anything else is a warning in `warnings`.
    pub fn read(
        file: &str,
        doc: &Document,
        node: Node,
        known: &[&str],
        nested: &[&str],
        warnings: &mut Vec<String>,
    ) -> Result<Params, ImportError> {
        let mut given: BTreeMap<String, (String, u32)> = BTreeMap::new();
        for c in node.children().filter(|c| c.is_element()) {
            let name = c.tag_name().name();
            let line = line_of(doc, c);
            let loc = Loc::new(file, Some(line), name);
            if nested.contains(&name) {
                continue;
            }
            if !known.contains(&name) {
                let why = MISSPELLED.iter().find(|(n, _)| *n == name).map_or_else(
                    || {
                        format!(
                            "not a parameter of <{}> that MQSim reads: MQSim ignores it, and so does the import",
                            node.tag_name().name()
                        )
                    },
                    |(_, why)| why.to_string(),
                );
                warnings.push(loc.warning(&why));
                continue;
            }
            if c.children().any(|g| g.is_element()) {
                return Err(loc.err("expected a value, found elements inside it"));
            }
            let value = c.text().unwrap_or("").trim().to_string();
            if let Some((_, first)) = given.insert(name.to_string(), (value, line)) {
                warnings.push(loc.warning(&format!(
                    "given twice (lines {first} and {line}): MQSim takes the last, and so does the import"
                )));
            }
        }
        Ok(Params { file: file.to_string(), given })
    }

    /// Where `name` is: its line if given.
    pub fn loc(&self, name: &str) -> Loc {
        Loc::new(&self.file, self.given.get(name).map(|(_, l)| *l), name)
    }

    pub fn is_given(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }

    /// The value's text, or `default`'s; an error when there is neither (a flow parameter MQSim
    /// leaves uninitialised) or the value is empty.
    fn text(&self, name: &str, default: Option<String>) -> Result<(String, Loc, bool), ImportError> {
        let loc = self.loc(name);
        match (self.given.get(name), default) {
            (Some((v, _)), _) if v.is_empty() => Err(loc.err("empty: expected a value (MQSim stops with an error)")),
            (Some((v, _)), _) => Ok((v.clone(), loc, true)),
            (None, Some(d)) => Ok((d, loc, false)),
            (None, None) => Err(loc.err(
                "missing: MQSim has no default for this flow parameter (its value would be whatever is in memory): give it",
            )),
        }
    }

    /// An unsigned integer of at most `max`.
    pub fn uint(&self, name: &str, default: Option<u64>, max: u64) -> Result<Val<u64>, ImportError> {
        let (t, loc, given) = self.text(name, default.map(|d| d.to_string()))?;
        match t.parse::<u64>() {
            Ok(v) if v <= max => Ok(Val { v, loc, given }),
            Ok(v) => Err(loc.err(format!("{v} is out of range: expected at most {max}"))),
            Err(_) => Err(loc.err(format!("'{t}' is not a whole number: expected one from 0 to {max}"))),
        }
    }

    /// A signed integer (MQSim's `stoi`).
    pub fn int(&self, name: &str, default: Option<i64>) -> Result<Val<i64>, ImportError> {
        let (t, loc, given) = self.text(name, default.map(|d| d.to_string()))?;
        match t.parse::<i32>() {
            Ok(v) => Ok(Val { v: v as i64, loc, given }),
            Err(_) => Err(loc.err(format!("'{t}' is not a whole number: expected a 32-bit integer"))),
        }
    }

    /// A finite number (MQSim's `stod`).
    pub fn float(&self, name: &str, default: Option<f64>) -> Result<Val<f64>, ImportError> {
        let (t, loc, given) = self.text(name, default.map(|d| d.to_string()))?;
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Val { v, loc, given }),
            _ => Err(loc.err(format!("'{t}' is not a number"))),
        }
    }

    /// `true` or `false`, in any case.
    pub fn boolean(&self, name: &str, default: Option<bool>) -> Result<Val<bool>, ImportError> {
        let (t, loc, given) = self.text(name, default.map(|d| d.to_string()))?;
        match t.to_ascii_uppercase().as_str() {
            "TRUE" => Ok(Val { v: true, loc, given }),
            "FALSE" => Ok(Val { v: false, loc, given }),
            _ => Err(loc.err(format!(
                "'{t}' is not a boolean: expected true or false (MQSim would take anything but FALSE as true)"
            ))),
        }
    }

    /// One of `allowed` (upper case), in any case.
    pub fn choice(
        &self,
        name: &str,
        default: Option<&'static str>,
        allowed: &[&'static str],
    ) -> Result<Val<&'static str>, ImportError> {
        let (t, loc, given) = self.text(name, default.map(str::to_string))?;
        let up = t.to_ascii_uppercase();
        match allowed.iter().find(|a| **a == up) {
            Some(a) => Ok(Val { v: *a, loc, given }),
            None => Err(loc.err(format!(
                "unknown value '{t}': expected one of {} (MQSim stops with an error)",
                allowed.join(", ")
            ))),
        }
    }

    /// A comma-separated list of resource ids (a flow's `Channel_IDs` and the like), as a set:
    /// sorted, repeats dropped, as MQSim reads it.
    pub fn ids(&self, name: &str) -> Result<Val<Vec<u32>>, ImportError> {
        let (t, loc, given) = self.text(name, None)?;
        let mut ids = Vec::new();
        for part in t.split(',') {
            let p = part.trim();
            let id = p.parse::<u32>().map_err(|_| {
                loc.err(format!("'{p}' is not an id: expected a comma-separated list of whole numbers"))
            })?;
            ids.push(id);
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(Val { v: ids, loc, given })
    }

    /// The text of a parameter given as is (a path).
    pub fn string(&self, name: &str) -> Result<Val<String>, ImportError> {
        let (v, loc, given) = self.text(name, None)?;
        Ok(Val { v, loc, given })
    }
}
