//! The WML grammar: tokens → statements with their attribute lists, values still unresolved
//! (`$name` kept as a reference). Follows Filebench's `parser_gram.y` for the commands it takes;
//! `build.rs` resolves the values and types the result.

use super::lex::{Tok, Token};
use super::model::{FlowopKind, QuitMode, REFUSED_FLOWOPS};
use super::WmlError;
use crate::units::shown;
use crate::workload::fio::Diagnostic;

/// A value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Val {
    Int(u64),
    Bool(bool),
    Str(String),
    Var(String),
}

/// A value and its line.
#[derive(Debug, Clone)]
pub(super) struct RawValue {
    pub val: Val,
    pub line: usize,
}

/// `name` or `name=value` in an attribute list.
#[derive(Debug, Clone)]
pub(super) struct RawAttr {
    pub name: String,
    pub value: Option<RawValue>,
    pub line: usize,
}

#[derive(Debug)]
pub(super) struct RawFlowop {
    pub kind: FlowopKind,
    pub line: usize,
    pub attrs: Vec<RawAttr>,
}

#[derive(Debug)]
pub(super) struct RawThread {
    pub line: usize,
    pub attrs: Vec<RawAttr>,
    pub flowops: Vec<RawFlowop>,
}

/// One command of the file.
#[derive(Debug)]
pub(super) enum Stmt {
    Set { name: String, value: RawValue },
    Mode(QuitMode),
    Fileset { file: bool, line: usize, attrs: Vec<RawAttr> },
    Process { line: usize, attrs: Vec<RawAttr>, threads: Vec<RawThread> },
    Run { line: usize, seconds: Option<RawValue> },
    Psrun { line: usize, interval: i64, seconds: u64 },
}

pub(super) struct Parser<'a> {
    toks: &'a [Token],
    pos: usize,
    file: &'a str,
    pub warnings: Vec<Diagnostic>,
}

impl<'a> Parser<'a> {
    pub fn new(toks: &'a [Token], file: &'a str) -> Self {
        Parser { toks, pos: 0, file, warnings: Vec::new() }
    }

    fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    /// The line of the next token, or of the last one at the end of the text.
    fn line(&self) -> usize {
        self.toks.get(self.pos).or(self.toks.last()).map_or(1, |t| t.line)
    }

    fn syntax(&self, line: usize, message: String) -> WmlError {
        WmlError::Syntax { file: self.file.to_string(), line, message }
    }

    fn unsupported(&self, line: usize, what: &str, reason: &str) -> WmlError {
        WmlError::Unsupported { file: self.file.to_string(), line, what: what.to_string(), reason: reason.to_string() }
    }

    fn warn(&mut self, line: usize, message: String) {
        self.warnings.push(Diagnostic { file: self.file.to_string(), line, message });
    }

    /// "expected X, found Y" at the next token (or at the end of the text).
    fn expected(&self, what: &str) -> WmlError {
        let found = self.peek().map_or("the end of the file".to_string(), Tok::describe);
        self.syntax(self.line(), format!("expected {what}, found {found}"))
    }

    fn word(&mut self, what: &str) -> Result<(&'a str, usize), WmlError> {
        match self.toks.get(self.pos) {
            Some(Token { tok: Tok::Word(w), line }) => {
                self.pos += 1;
                Ok((w, *line))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        let hit = self.peek() == Some(tok);
        self.pos += usize::from(hit);
        hit
    }

    /// Every statement of the file.
    pub fn statements(&mut self) -> Result<Vec<Stmt>, WmlError> {
        let mut out = Vec::new();
        while self.pos < self.toks.len() {
            if let Some(stmt) = self.statement()? {
                out.push(stmt);
            }
        }
        Ok(out)
    }

    fn statement(&mut self) -> Result<Option<Stmt>, WmlError> {
        let line = self.line();
        let (command, _) = self.word("a command (set, define, run, ...)")?;
        match command {
            "set" => self.set(line),
            "define" => self.define(line).map(Some),
            "echo" | "usage" => match self.peek() {
                Some(Tok::Quoted(_)) => {
                    self.pos += 1;
                    Ok(None)
                }
                _ => Err(self.expected(&format!("a quoted string after {command}"))),
            },
            "run" => {
                let seconds = match self.peek() {
                    Some(Tok::Int(_) | Tok::Var(_)) => Some(self.value("a number of seconds")?),
                    _ => None,
                };
                Ok(Some(Stmt::Run { line, seconds }))
            }
            "psrun" => self.psrun(line).map(Some),
            "create" => {
                let (what, l) = self.word("files after create")?;
                if !matches!(what, "files" | "fileset" | "filesets" | "processes") {
                    return Err(self.syntax(l, format!("create {}: expected create files", shown(what))));
                }
                Ok(None)
            }
            "enable" => {
                let (what, l) = self.word("lathist after enable")?;
                if what != "lathist" {
                    return Err(self.unsupported(
                        l,
                        &format!("enable {}", shown(what)),
                        "only enable lathist is accepted",
                    ));
                }
                self.warn(line, "enable lathist: latency histograms are not kept (ignored)".into());
                Ok(None)
            }
            "debug" => match self.peek() {
                Some(Tok::Int(_)) => {
                    self.pos += 1;
                    self.warn(line, "debug: Filebench's log level (ignored)".into());
                    Ok(None)
                }
                _ => Err(self.expected("a level after debug")),
            },
            "eventgen" => {
                Err(self.unsupported(line, "eventgen", "rate-driven runs (an event generator) are not modelled"))
            }
            "system" => Err(self.unsupported(line, "system", "a workload may not run shell commands")),
            "flowop" => Err(self.syntax(line, "flowop outside a thread".into())),
            "thread" => Err(self.syntax(line, "thread outside a define process".into())),
            other => Err(self.syntax(line, format!("unknown command '{}'", shown(other)))),
        }
    }

    fn set(&mut self, line: usize) -> Result<Option<Stmt>, WmlError> {
        match self.peek() {
            Some(Tok::Var(name)) => {
                self.pos += 1;
                if !self.eat(&Tok::Assign) {
                    return Err(self.expected(&format!("'=' after set ${}", shown(name))));
                }
                if let Some(Tok::Word(w)) = self.peek() {
                    if matches!(w.as_str(), "cvar" | "randvar")
                        && self.toks.get(self.pos + 1).map(|t| &t.tok) == Some(&Tok::OpenParen)
                    {
                        let what = format!("set ${} = {w}(...)", shown(name));
                        return Err(self.unsupported(
                            self.line(),
                            &what,
                            "random variables (Filebench 1.5 cvar, randvar) are not supported; give a number",
                        ));
                    }
                }
                let value = self.value("a value (a number, size, true, false, word or quoted string)")?;
                if matches!(value.val, Val::Var(_)) {
                    return Err(self.syntax(value.line, "set: a variable's value may not be another variable".into()));
                }
                Ok(Some(Stmt::Set { name: name.clone(), value }))
            }
            Some(Tok::Word(w)) if w == "mode" => {
                self.pos += 1;
                let (word, l) = self.word("quit or nousestats after set mode")?;
                match word {
                    "quit" => {
                        let (mode, l) = self.word("timeout, alldone or firstdone after set mode quit")?;
                        let mode =
                            QuitMode::from_name(mode).ok_or_else(|| self.syntax(l, QuitMode::unknown(&shown(mode))))?;
                        Ok(Some(Stmt::Mode(mode)))
                    }
                    "nousestats" => {
                        self.warn(line, "set mode nousestats: CPU statistics are not kept (ignored)".into());
                        Ok(None)
                    }
                    other => Err(self.syntax(l, format!("set mode {}: expected quit or nousestats", shown(other)))),
                }
            }
            _ => Err(self.expected("a $variable or mode after set")),
        }
    }

    fn psrun(&mut self, line: usize) -> Result<Stmt, WmlError> {
        let interval = match self.peek() {
            Some(&Tok::NegInt(n)) => Some(n),
            Some(&Tok::Int(n)) => Some(
                i64::try_from(n).map_err(|_| self.syntax(self.line(), format!("psrun interval {n} is too large")))?,
            ),
            _ => None,
        };
        let mut seconds = 0;
        if interval.is_some() {
            self.pos += 1;
            if let Some(&Tok::Int(n)) = self.peek() {
                self.pos += 1;
                seconds = n;
            }
        }
        Ok(Stmt::Psrun { line, interval: interval.unwrap_or(0), seconds })
    }

    /// One value token.
    fn value(&mut self, what: &str) -> Result<RawValue, WmlError> {
        let val = match self.peek() {
            Some(Tok::Int(n)) => Val::Int(*n),
            Some(Tok::Bool(b)) => Val::Bool(*b),
            Some(Tok::Word(w) | Tok::Quoted(w)) => Val::Str(w.clone()),
            Some(Tok::Var(v)) => Val::Var(v.clone()),
            _ => return Err(self.expected(what)),
        };
        let line = self.line();
        self.pos += 1;
        Ok(RawValue { val, line })
    }

    fn define(&mut self, line: usize) -> Result<Stmt, WmlError> {
        let (what, l) = self.word("fileset, file or process after define")?;
        match what {
            "fileset" | "filesets" => Ok(Stmt::Fileset { file: false, line, attrs: self.attrs()? }),
            "file" => Ok(Stmt::Fileset { file: true, line, attrs: self.attrs()? }),
            w if w.starts_with("process") => self.process(line),
            "randvar" => {
                Err(self.unsupported(l, "define randvar", "random variables are not supported; give a number"))
            }
            "flowop" => Err(self.unsupported(l, "define flowop", "composite flowops are not supported")),
            other => Err(self.syntax(l, format!("define {}: expected fileset, file or process", shown(other)))),
        }
    }

    /// `name[=value]` items separated by commas (at least one).
    fn attrs(&mut self) -> Result<Vec<RawAttr>, WmlError> {
        let mut out = Vec::new();
        loop {
            let (name, line) = self.word("an attribute name")?;
            let value = if self.eat(&Tok::Assign) {
                Some(self.value(&format!("a value after '{}='", shown(name)))?)
            } else {
                None
            };
            out.push(RawAttr { name: name.to_string(), value, line });
            if !self.eat(&Tok::Comma) {
                return Ok(out);
            }
        }
    }

    /// `{`, checked; returns its line for the unterminated-brace message.
    fn open(&mut self, after: &str) -> Result<usize, WmlError> {
        let line = self.line();
        if self.eat(&Tok::Open) {
            Ok(line)
        } else {
            Err(self.expected(&format!("'{{' after {after}")))
        }
    }

    fn unterminated(&self, open: usize, what: &str) -> WmlError {
        self.syntax(open, format!("unterminated '{{' of {what}: the file ends before its '}}'"))
    }

    fn process(&mut self, line: usize) -> Result<Stmt, WmlError> {
        let attrs = self.attrs()?;
        let open = self.open("define process's attributes")?;
        let threads = self.block(open, "define process", "thread", Self::thread)?;
        Ok(Stmt::Process { line, attrs, threads })
    }

    fn thread(&mut self, line: usize) -> Result<RawThread, WmlError> {
        let attrs = self.attrs()?;
        let open = self.open("thread's attributes")?;
        let flowops = self.block(open, "thread", "flowop", Self::flowop)?;
        Ok(RawThread { line, attrs, flowops })
    }

    /// The items of the block opened at line `open` (`what`'s), each starting with `keyword`
    /// and read by `item` (given its line), up to the block's `}`.
    fn block<T>(
        &mut self,
        open: usize,
        what: &str,
        keyword: &str,
        item: fn(&mut Self, usize) -> Result<T, WmlError>,
    ) -> Result<Vec<T>, WmlError> {
        let mut items = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.unterminated(open, what)),
                Some(Tok::Close) => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(Tok::Word(w)) if w == keyword => {
                    let line = self.line();
                    self.pos += 1;
                    items.push(item(self, line)?);
                }
                _ => return Err(self.expected(keyword)),
            }
        }
    }

    fn flowop(&mut self, line: usize) -> Result<RawFlowop, WmlError> {
        let (name, l) = self.word("a flowop type after flowop")?;
        let kind = match FlowopKind::from_name(name) {
            Some(kind) => kind,
            None => {
                if let Some((_, reason)) = REFUSED_FLOWOPS.iter().find(|(n, _)| *n == name) {
                    return Err(self.unsupported(l, &format!("flowop {name}"), reason));
                }
                return Err(self.syntax(l, FlowopKind::unknown(&shown(name))));
            }
        };
        let attrs = match self.peek() {
            Some(Tok::Word(w)) if w != "flowop" => self.attrs()?,
            _ => Vec::new(),
        };
        Ok(RawFlowop { kind, line, attrs })
    }
}
