//! Filebench workload files (`.f`, the Workload Model Language): a reader that turns their text
//! into a typed, validated [`Workload`] — filesets, processes → threads → flowops, the run — for
//! a file-system model to run. Nothing here runs anything.
//!
//! # Language
//! The subset the standard personalities use, read as Filebench reads it (the grammar of its
//! `parser_gram.y` and tokens of `parser_lex.l`; the fileset defaults of Filebench 1.4.9, the
//! last version with `filesizegamma`):
//! - statements are free-form: newlines are blanks, `#` comments to the end of the line;
//! - `set $name = value` with an integer, a size (`16k`, `1m`, `1g`: powers of 1,024), `true` /
//!   `false`, a word or a quoted string; `$name` stands for a value anywhere one goes. A variable
//!   takes its last assignment in the file (Filebench reads variables when the run starts, so a
//!   later `set` overrides a default); an undefined one is an error at its line;
//! - `set mode quit timeout|alldone|firstdone`; `echo "..."`, `usage "..."`, `create files`
//!   accepted and ignored (`enable lathist`, `set mode nousestats`, `debug N` with a warning);
//! - `define fileset name=, path=, entries=, dirwidth=, size= (filesize=), filesizegamma=,
//!   dirgamma=, prealloc[=percent], reuse, paralloc, readonly, writeonly, trusttree, cached`;
//!   `define file name=, path=, size=, prealloc, reuse, ...` (a fileset of one file);
//! - `define process name=, instances=N { thread name=, memsize=, useism, instances=N { flowop
//!   <type> name=, ... } }`, several threads per process, several flowops per thread;
//! - the flowops of [`FlowopKind`] with the attributes of [`FlowopAttrs`];
//! - `run [N]`, `psrun [interval [N]]` (one per file).
//!
//! Refused with an error naming the line: Filebench 1.5's random variables (`cvar(...)`,
//! `randvar`), composite flowops (`define flowop`), `eventgen`, `system`, asynchronous I/O
//! (`aiowrite`, `aiowait`), directory flowops and leaf-directory filesets, arithmetic in `set`.
//! Filebench's `oltp.f` is therefore not bundled: it needs `eventgen`, `aiowrite` and `aiowait`.
//!
//! # Worked example
//! `define fileset name=bigfileset,path=/tmp,size=128k,entries=10000,dirwidth=20,prealloc=80`
//! is 10,000 files in directories of about 20 entries, sizes gamma-distributed with shape 1.5
//! (Filebench's default `filesizegamma=1500`) around a mean of 131,072 bytes, 8,000 of them
//! created before the run. A flowop naming a fileset no `define` has, an `fd` outside 1..=128,
//! `instances=0`, `iosize=0`, a thread without flowops or a name used twice is an error at its
//! line. Which flowops a model can run is [`FlowopKind::support`].
//!
//! Source: Filebench (github.com/filebench/filebench), `parser_gram.y`, `parser_lex.l`,
//! `flowop_library.c`, `threadflow.h`, and its `workloads/*.f`; the bundled personalities
//! ([`personality`]) restate its fileserver, varmail, webproxy and webserver.

mod build;
mod lex;
mod model;
mod parse;
mod print;
pub mod run;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod tests;

use std::path::Path;

use crate::units::shown;
use crate::workload::fio::Diagnostic;

pub use model::{
    Fileset, FilesetKind, Flowop, FlowopAttrs, FlowopKind, Process, QuitMode, Run, Support, Thread, Value, Workload,
    MAX_FD,
};
pub use print::to_wml;

/// A malformed, unsupported or inconsistent workload file.
#[derive(Debug, thiserror::Error)]
pub enum WmlError {
    /// The text does not follow the grammar (a bad token, a missing `{`, an unknown command).
    #[error("{file}:{line}: {message}")]
    Syntax { file: String, line: usize, message: String },
    /// `$name` names a variable no `set` defines.
    #[error("{file}:{line}: unknown variable '${}'", shown(.name))]
    UnknownVariable { file: String, line: usize, name: String },
    /// An attribute's value has the wrong type or is out of range.
    #[error("{file}:{line}: {what}: invalid value '{value}': expected {expected}")]
    InvalidValue { file: String, line: usize, what: String, value: String, expected: String },
    /// Valid Filebench that this reader refuses rather than misread.
    #[error("{file}:{line}: {what} is not supported: {reason}")]
    Unsupported { file: String, line: usize, what: String, reason: String },
    /// Well formed but inconsistent: a missing or undefined name, a duplicate, an empty thread.
    #[error("{file}:{line}: {message}")]
    Invalid { file: String, line: usize, message: String },
    /// The file cannot be read (only regular files of at most
    /// [`crate::fsutil::MAX_INPUT_FILE_BYTES`]).
    #[error("cannot read workload file '{path}': {error}")]
    Io { path: String, error: crate::fsutil::ReadError },
}

/// A read workload file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WmlFile {
    pub workload: Workload,
    /// Things accepted but ignored, with their lines.
    pub warnings: Vec<Diagnostic>,
}

/// Reads WML text; `file` names it in messages.
pub fn parse_wml(text: &str, file: &str) -> Result<WmlFile, WmlError> {
    let tokens =
        lex::lex(text).map_err(|e| WmlError::Syntax { file: file.to_string(), line: e.line, message: e.message })?;
    let mut parser = parse::Parser::new(&tokens, file);
    let statements = parser.statements()?;
    let workload = build::build(statements, file)?;
    Ok(WmlFile { workload, warnings: parser.warnings })
}

/// Reads a workload file from disk.
pub fn parse_wml_file(path: &Path) -> Result<WmlFile, WmlError> {
    let name = path.display().to_string();
    let text = crate::fsutil::read_text(path, crate::fsutil::MAX_INPUT_FILE_BYTES, "Filebench workload file")
        .map_err(|error| WmlError::Io { path: name.clone(), error })?;
    parse_wml(&text, &name)
}

/// The bundled personalities, by name, with their WML text.
const PERSONALITIES: &[(&str, &str)] = &[
    ("fileserver", include_str!("personalities/fileserver.f")),
    ("varmail", include_str!("personalities/varmail.f")),
    ("webproxy", include_str!("personalities/webproxy.f")),
    ("webserver", include_str!("personalities/webserver.f")),
];

/// Names of the bundled personalities.
pub fn personality_names() -> impl Iterator<Item = &'static str> {
    PERSONALITIES.iter().map(|(name, _)| *name)
}

/// The WML text of the bundled personality `name`.
pub fn personality(name: &str) -> Option<&'static str> {
    PERSONALITIES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}
