//! Statements → the typed [`Workload`]: variables resolved, attributes typed with Filebench's
//! defaults, and the rules between parts checked, each error at the line it comes from.
//!
//! Variables resolve to their last assignment in the file, wherever the reference is: Filebench
//! keeps a reference and reads the variable when the run starts, so a `set` after a `define`
//! (the usual way to override a personality's default) counts.

use std::collections::BTreeMap;

use super::model::{
    Fileset, FilesetKind, Flowop, FlowopAttrs, Process, QuitMode, Run, Thread, Value, Workload, MAX_FD,
};
use super::parse::{RawAttr, RawFlowop, RawThread, RawValue, Stmt, Val};
use super::WmlError;
use crate::units::shown;

const FILESET_ATTRS: &[&str] = &[
    "name",
    "path",
    "entries",
    "size",
    "filesize",
    "prealloc",
    "paralloc",
    "reuse",
    "trusttree",
    "readonly",
    "writeonly",
    "cached",
    "dirwidth",
    "dirgamma",
    "filesizegamma",
];
const FILE_ATTRS: &[&str] = &[
    "name",
    "path",
    "size",
    "filesize",
    "prealloc",
    "paralloc",
    "reuse",
    "trusttree",
    "readonly",
    "writeonly",
    "cached",
];
const PROCESS_ATTRS: &[&str] = &["name", "instances", "nice"];
const THREAD_ATTRS: &[&str] = &["name", "memsize", "useism", "instances", "ioprio"];
const FLOWOP_ATTRS: &[&str] = &[
    "name",
    "filesetname",
    "filename",
    "fd",
    "srcfd",
    "iosize",
    "iters",
    "random",
    "dsync",
    "directio",
    "workingset",
    "value",
    "target",
    "indexed",
    "blocking",
    "highwater",
    "opennext",
    "noreadahead",
];
/// Attributes Filebench has that this reader refuses, with why.
const REFUSED_ATTRS: &[(&str, &str)] = &[
    ("leafdirs", "filesets of leaf directories are not supported"),
    ("dirdepthrv", "random variables are not supported"),
];

/// Variables, file name, and the references to check once everything is defined.
struct Ctx<'a> {
    file: &'a str,
    vars: BTreeMap<String, Value>,
    /// (fileset name, line) of every `filesetname=`.
    fileset_refs: Vec<(String, usize)>,
    /// (flowop name, line) of every `target=`.
    target_refs: Vec<(String, usize)>,
}

/// One attribute list with what it belongs to (`define fileset 'bigfileset'`), for messages.
struct Attrs<'a, 'c> {
    owner: String,
    list: &'a [RawAttr],
    ctx: &'c Ctx<'a>,
}

pub(super) fn build(stmts: Vec<Stmt>, file: &str) -> Result<Workload, WmlError> {
    let mut vars = BTreeMap::new();
    for stmt in &stmts {
        if let Stmt::Set { name, value } = stmt {
            let v = match &value.val {
                Val::Int(n) => Value::Int(*n),
                Val::Bool(b) => Value::Bool(*b),
                Val::Str(s) => Value::Str(s.clone()),
                Val::Var(_) => unreachable!("the parser refuses a variable as a variable's value"),
            };
            vars.insert(name.clone(), v);
        }
    }
    let mut ctx = Ctx { file, vars, fileset_refs: Vec::new(), target_refs: Vec::new() };
    let mut w = Workload {
        filesets: Vec::new(),
        processes: Vec::new(),
        run: None,
        quit_mode: QuitMode::default(),
        variables: BTreeMap::new(),
    };
    for stmt in &stmts {
        match stmt {
            Stmt::Set { .. } => {}
            Stmt::Mode(mode) => w.quit_mode = *mode,
            Stmt::Fileset { file, line, attrs } => {
                let fs = ctx.fileset(*file, *line, attrs)?;
                if w.fileset(&fs.name).is_some() {
                    return Err(ctx.invalid(*line, format!("fileset '{}' is defined twice", shown(&fs.name))));
                }
                w.filesets.push(fs);
            }
            Stmt::Process { line, attrs, threads } => {
                let p = ctx.process(*line, attrs, threads)?;
                if w.processes.iter().any(|q| q.name == p.name) {
                    return Err(ctx.invalid(*line, format!("process '{}' is defined twice", shown(&p.name))));
                }
                w.processes.push(p);
            }
            Stmt::Run { line, seconds } => {
                let seconds = match seconds {
                    Some(v) => Some(ctx.int_value(v, "run", "a number of seconds")?),
                    None => None,
                };
                ctx.set_run(&mut w, *line, Run::Run { seconds })?;
            }
            Stmt::Psrun { line, interval, seconds } => {
                ctx.set_run(&mut w, *line, Run::Psrun { interval: *interval, seconds: *seconds })?
            }
        }
    }
    ctx.check_refs(&w)?;
    w.variables = ctx.vars;
    Ok(w)
}

impl<'a> Ctx<'a> {
    fn invalid(&self, line: usize, message: String) -> WmlError {
        WmlError::Invalid { file: self.file.to_string(), line, message }
    }

    fn set_run(&self, w: &mut Workload, line: usize, run: Run) -> Result<(), WmlError> {
        if w.run.is_some() {
            return Err(self.invalid(line, "a second run or psrun: a workload runs once".into()));
        }
        w.run = Some(run);
        Ok(())
    }

    fn resolve(&self, v: &RawValue) -> Result<Value, WmlError> {
        match &v.val {
            Val::Int(n) => Ok(Value::Int(*n)),
            Val::Bool(b) => Ok(Value::Bool(*b)),
            Val::Str(s) => Ok(Value::Str(s.clone())),
            Val::Var(name) => self.vars.get(name).cloned().ok_or_else(|| WmlError::UnknownVariable {
                file: self.file.to_string(),
                line: v.line,
                name: name.clone(),
            }),
        }
    }

    fn int_value(&self, v: &RawValue, what: &str, expected: &str) -> Result<u64, WmlError> {
        match self.resolve(v)? {
            Value::Int(n) => Ok(n),
            other => Err(WmlError::InvalidValue {
                file: self.file.to_string(),
                line: v.line,
                what: what.to_string(),
                value: shown_value(&other),
                expected: expected.to_string(),
            }),
        }
    }

    /// Checks the names in `list` against `allowed` and for repeats.
    fn attrs<'c>(&'c self, what: &str, list: &'a [RawAttr], allowed: &[&str]) -> Result<Attrs<'a, 'c>, WmlError> {
        for (i, a) in list.iter().enumerate() {
            if let Some((_, reason)) = REFUSED_ATTRS.iter().find(|(n, _)| *n == a.name) {
                return Err(WmlError::Unsupported {
                    file: self.file.to_string(),
                    line: a.line,
                    what: format!("{what}: attribute '{}'", a.name),
                    reason: reason.to_string(),
                });
            }
            if !allowed.contains(&a.name.as_str()) {
                let message =
                    format!("{what}: unknown attribute '{}': expected one of {}", shown(&a.name), allowed.join(", "));
                return Err(self.invalid(a.line, message));
            }
            if list[..i].iter().any(|b| canonical(&b.name) == canonical(&a.name)) {
                return Err(self.invalid(a.line, format!("{what}: attribute '{}' given twice", a.name)));
            }
        }
        let mut attrs = Attrs { owner: what.to_string(), list, ctx: self };
        if let Some(name) = attrs.string("name")? {
            attrs.owner = format!("{what} '{}'", shown(&name));
        }
        Ok(attrs)
    }

    fn fileset(&self, file: bool, line: usize, list: &'a [RawAttr]) -> Result<Fileset, WmlError> {
        let what = if file { "define file" } else { "define fileset" };
        let a = self.attrs(what, list, if file { FILE_ATTRS } else { FILESET_ATTRS })?;
        let name = a.required_string("name", line)?;
        let path = a.required_string("path", line)?;
        let (entries, dirwidth, gamma) = if file {
            // Filebench's parser_file_define: one entry, width 10, no gammas.
            (1, 10, 0)
        } else {
            let entries = a.required_int("entries", line, "a number of files of at least 1", 1)?;
            let dirwidth = a.required_int("dirwidth", line, "a mean directory width of at least 1", 1)?;
            (entries, dirwidth, 1500)
        };
        let prealloc_percent = match a.get("prealloc") {
            None => 0,
            Some(RawAttr { value: None, .. }) => 100,
            Some(_) => match a.value("prealloc")? {
                Some((Value::Bool(b), _)) => 100 * u64::from(b),
                _ => a.int_in("prealloc", 0, 100, "a percentage from 0 to 100")?.unwrap_or(100),
            },
        };
        Ok(Fileset {
            name,
            line,
            kind: if file { FilesetKind::File } else { FilesetKind::Fileset },
            path,
            entries,
            dirwidth,
            mean_size: a.int("size", "a size in bytes (16k, 1m, 4096)")?.unwrap_or(0),
            size_gamma: a.int("filesizegamma", "a gamma shape × 1000 (1500 for 1.5)")?.unwrap_or(gamma),
            dir_gamma: a.int("dirgamma", "a gamma shape × 1000 (1500 for 1.5)")?.unwrap_or(gamma),
            prealloc_percent,
            reuse: a.flag("reuse")?,
            paralloc: a.flag("paralloc")?,
            readonly: a.flag("readonly")?,
            writeonly: a.flag("writeonly")?,
            trusttree: a.flag("trusttree")?,
            cached: a.flag("cached")?,
        })
    }

    fn process(&mut self, line: usize, list: &'a [RawAttr], threads: &'a [RawThread]) -> Result<Process, WmlError> {
        let a = self.attrs("define process", list, PROCESS_ATTRS)?;
        let name = a.required_string("name", line)?;
        let instances = a.int_in("instances", 1, u64::MAX, "a number of instances of at least 1")?.unwrap_or(1);
        let nice = a.int("nice", "a number")?;
        if threads.is_empty() {
            return Err(self.invalid(line, format!("process '{}' has no threads", shown(&name))));
        }
        let mut out: Vec<Thread> = Vec::with_capacity(threads.len());
        for t in threads {
            let thread = self.thread(t)?;
            if out.iter().any(|u| u.name == thread.name) {
                let message = format!("process '{}': thread '{}' is defined twice", shown(&name), shown(&thread.name));
                return Err(self.invalid(t.line, message));
            }
            out.push(thread);
        }
        Ok(Process { name, line, instances, nice, threads: out })
    }

    fn thread(&mut self, t: &'a RawThread) -> Result<Thread, WmlError> {
        let a = self.attrs("thread", &t.attrs, THREAD_ATTRS)?;
        let name = a.required_string("name", t.line)?;
        let instances = a.int_in("instances", 1, u64::MAX, "a number of instances of at least 1")?.unwrap_or(1);
        let (memsize, useism, ioprio) =
            (a.int("memsize", "a size in bytes")?, a.flag("useism")?, a.int("ioprio", "a number")?);
        if t.flowops.is_empty() {
            return Err(self.invalid(t.line, format!("thread '{}' has no flowops", shown(&name))));
        }
        let mut flowops: Vec<Flowop> = Vec::with_capacity(t.flowops.len());
        for f in &t.flowops {
            let op = self.flowop(f)?;
            if flowops.iter().any(|o| o.name == op.name) {
                let message = format!("thread '{}': flowop '{}' is defined twice", shown(&name), shown(&op.name));
                return Err(self.invalid(f.line, message));
            }
            flowops.push(op);
        }
        Ok(Thread { name, line: t.line, instances, memsize, useism, ioprio, flowops })
    }

    fn flowop(&mut self, f: &'a RawFlowop) -> Result<Flowop, WmlError> {
        let what = format!("flowop {}", f.kind);
        let a = self.attrs(&what, &f.attrs, FLOWOP_ATTRS)?;
        let name = a.required_string("name", f.line)?;
        let fd_expected = format!("a file descriptor from 1 to {MAX_FD}");
        let fd = |key| a.int_in(key, 1, u64::from(MAX_FD), &fd_expected).map(|v| v.map(|n| n as u32));
        let attrs = FlowopAttrs {
            fileset: a.string("filesetname")?,
            fd: fd("fd")?,
            srcfd: fd("srcfd")?,
            iosize: a.int_in("iosize", 1, u64::MAX, "a size of at least 1 byte (16k, 1m, 4096)")?,
            iters: a.int_in("iters", 1, u64::MAX, "a count of at least 1")?.unwrap_or(1),
            workingset: a.int("workingset", "a size in bytes")?,
            value: a.int("value", "a number")?,
            target: a.string("target")?,
            indexed: a.int("indexed", "a file index")?,
            highwater: a.int("highwater", "a number")?,
            random: a.flag("random")?,
            dsync: a.flag("dsync")?,
            directio: a.flag("directio")?,
            blocking: a.flag("blocking")?,
            opennext: a.flag("opennext")?,
            noreadahead: a.flag("noreadahead")?,
        };
        let owner = a.owner.clone();
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(self.invalid(f.line, format!("{owner}: needs {what}")))
            }
        };
        need(!f.kind.needs_iosize() || attrs.iosize.is_some(), "iosize")?;
        need(!f.kind.needs_fileset() || attrs.fileset.is_some(), "filesetname")?;
        need(!f.kind.needs_target() || attrs.target.is_some(), "target (the flowop it acts on)")?;
        let ref_line = |key| a.get(key).map_or(f.line, |r| r.line);
        let (fileset_line, target_line) = (ref_line("filesetname"), ref_line("target"));
        if let Some(fs) = &attrs.fileset {
            self.fileset_refs.push((fs.clone(), fileset_line));
        }
        if let Some(target) = &attrs.target {
            self.target_refs.push((target.clone(), target_line));
        }
        Ok(Flowop { kind: f.kind, name, line: f.line, attrs })
    }

    fn check_refs(&self, w: &Workload) -> Result<(), WmlError> {
        for (name, line) in &self.fileset_refs {
            if w.fileset(name).is_none() {
                return Err(self.invalid(*line, format!("no fileset or file named '{}' is defined", shown(name))));
            }
        }
        for (name, line) in &self.target_refs {
            if !w.flowops().any(|o| &o.name == name) {
                return Err(self.invalid(*line, format!("target '{}': no flowop has that name", shown(name))));
            }
        }
        Ok(())
    }
}

/// `filesize` is `size`, `filename` is `filesetname`, as in Filebench's lexer.
fn canonical(name: &str) -> &str {
    match name {
        "filesize" => "size",
        "filename" => "filesetname",
        other => other,
    }
}

fn shown_value(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => shown(s).into_owned(),
    }
}

impl Attrs<'_, '_> {
    fn get(&self, key: &str) -> Option<&RawAttr> {
        self.list.iter().find(|a| canonical(&a.name) == key)
    }

    fn bad(&self, a: &RawAttr, value: &Value, expected: &str) -> WmlError {
        WmlError::InvalidValue {
            file: self.ctx.file.to_string(),
            line: a.value.as_ref().map_or(a.line, |v| v.line),
            what: format!("{}: attribute '{}'", self.owner, a.name),
            value: shown_value(value),
            expected: expected.to_string(),
        }
    }

    /// The resolved value of `key=value` and its attribute; `None` if absent or bare.
    fn value(&self, key: &str) -> Result<Option<(Value, &RawAttr)>, WmlError> {
        match self.get(key) {
            Some(a @ RawAttr { value: Some(v), .. }) => Ok(Some((self.ctx.resolve(v)?, a))),
            _ => Ok(None),
        }
    }

    fn missing(&self, key: &str, line: usize) -> WmlError {
        self.ctx.invalid(line, format!("{}: needs {key}=", self.owner))
    }

    fn int(&self, key: &str, expected: &str) -> Result<Option<u64>, WmlError> {
        self.int_in(key, 0, u64::MAX, expected)
    }

    fn int_in(&self, key: &str, min: u64, max: u64, expected: &str) -> Result<Option<u64>, WmlError> {
        if let Some(a @ RawAttr { value: None, .. }) = self.get(key) {
            return Err(self.ctx.invalid(a.line, format!("{}: attribute '{}' needs a value", self.owner, a.name)));
        }
        match self.value(key)? {
            None => Ok(None),
            Some((Value::Int(n), _)) if (min..=max).contains(&n) => Ok(Some(n)),
            Some((v, a)) => Err(self.bad(a, &v, expected)),
        }
    }

    fn required_int(&self, key: &str, line: usize, expected: &str, min: u64) -> Result<u64, WmlError> {
        self.int_in(key, min, u64::MAX, expected)?.ok_or_else(|| self.missing(key, line))
    }

    /// A boolean attribute: bare is true; `=true`/`=false`; `=N` is true unless 0 (as Filebench).
    fn flag(&self, key: &str) -> Result<bool, WmlError> {
        match self.value(key)? {
            None => Ok(self.get(key).is_some()),
            Some((Value::Bool(b), _)) => Ok(b),
            Some((Value::Int(n), _)) => Ok(n != 0),
            Some((v, a)) => Err(self.bad(a, &v, "true, false or a number")),
        }
    }

    /// A name or path. A number is taken as its decimal text.
    fn string(&self, key: &str) -> Result<Option<String>, WmlError> {
        if let Some(a @ RawAttr { value: None, .. }) = self.get(key) {
            return Err(self.ctx.invalid(a.line, format!("{}: attribute '{}' needs a value", self.owner, a.name)));
        }
        match self.value(key)? {
            None => Ok(None),
            Some((Value::Str(s), a)) if s.is_empty() => Err(self.bad(a, &Value::Str(s), "a non-empty name")),
            Some((Value::Str(s), _)) => Ok(Some(s)),
            Some((Value::Int(n), _)) => Ok(Some(n.to_string())),
            Some((v, a)) => Err(self.bad(a, &v, "a name")),
        }
    }

    fn required_string(&self, key: &str, line: usize) -> Result<String, WmlError> {
        self.string(key)?.ok_or_else(|| self.missing(key, line))
    }
}
