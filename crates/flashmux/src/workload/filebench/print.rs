//! The typed workload back to WML: every value written out (no `$` references), the variables as
//! `set` lines first. Reading the text again gives the same workload, line numbers aside.

use std::fmt::Write;

use super::lex::is_plain_word;
use super::model::{Fileset, FilesetKind, Flowop, Run, Value, Workload};

/// WML text for `w`.
pub fn to_wml(w: &Workload) -> String {
    let mut out = String::new();
    for (name, value) in &w.variables {
        let _ = writeln!(out, "set ${name} = {}", value_text(value));
    }
    let _ = writeln!(out, "set mode quit {}", w.quit_mode);
    for fs in &w.filesets {
        out.push_str(&fileset(fs));
    }
    for p in &w.processes {
        let nice = p.nice.map(|n| format!(",nice={n}")).unwrap_or_default();
        let _ = writeln!(out, "define process name={},instances={}{nice}\n{{", quote(&p.name), p.instances);
        for t in &p.threads {
            let mut attrs = format!("name={},instances={}", quote(&t.name), t.instances);
            if let Some(m) = t.memsize {
                let _ = write!(attrs, ",memsize={m}");
            }
            if t.useism {
                attrs.push_str(",useism");
            }
            if let Some(n) = t.ioprio {
                let _ = write!(attrs, ",ioprio={n}");
            }
            let _ = writeln!(out, "  thread {attrs}\n  {{");
            for op in &t.flowops {
                let _ = writeln!(out, "    {}", flowop(op));
            }
            out.push_str("  }\n");
        }
        out.push_str("}\n");
    }
    match w.run {
        Some(Run::Run { seconds: Some(s) }) => _ = writeln!(out, "run {s}"),
        Some(Run::Run { seconds: None }) => out.push_str("run\n"),
        Some(Run::Psrun { interval, seconds }) => _ = writeln!(out, "psrun {interval} {seconds}"),
        None => {}
    }
    out
}

fn fileset(fs: &Fileset) -> String {
    let mut s = format!("name={},path={},size={}", quote(&fs.name), quote(&fs.path), fs.mean_size);
    let define = match fs.kind {
        FilesetKind::File => "file",
        FilesetKind::Fileset => {
            let _ = write!(
                s,
                ",entries={},dirwidth={},filesizegamma={},dirgamma={}",
                fs.entries, fs.dirwidth, fs.size_gamma, fs.dir_gamma
            );
            "fileset"
        }
    };
    let _ = write!(s, ",prealloc={}", fs.prealloc_percent);
    for (on, name) in [
        (fs.reuse, "reuse"),
        (fs.paralloc, "paralloc"),
        (fs.readonly, "readonly"),
        (fs.writeonly, "writeonly"),
        (fs.trusttree, "trusttree"),
        (fs.cached, "cached"),
    ] {
        if on {
            let _ = write!(s, ",{name}");
        }
    }
    format!("define {define} {s}\n")
}

fn flowop(op: &Flowop) -> String {
    let a = &op.attrs;
    let mut s = format!("flowop {} name={}", op.kind, quote(&op.name));
    if let Some(fs) = &a.fileset {
        let _ = write!(s, ",filesetname={}", quote(fs));
    }
    if let Some(t) = &a.target {
        let _ = write!(s, ",target={}", quote(t));
    }
    let numbers = [
        ("fd", a.fd.map(u64::from)),
        ("srcfd", a.srcfd.map(u64::from)),
        ("iosize", a.iosize),
        ("iters", Some(a.iters)),
        ("workingset", a.workingset),
        ("value", a.value),
        ("indexed", a.indexed),
        ("highwater", a.highwater),
    ];
    for (key, n) in numbers {
        if let Some(n) = n {
            let _ = write!(s, ",{key}={n}");
        }
    }
    let flags = [
        (a.random, "random"),
        (a.dsync, "dsync"),
        (a.directio, "directio"),
        (a.blocking, "blocking"),
        (a.opennext, "opennext"),
        (a.noreadahead, "noreadahead"),
    ];
    for (on, name) in flags {
        if on {
            let _ = write!(s, ",{name}");
        }
    }
    s
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => quote(s),
    }
}

/// A string as a word when it lexes back as one, else quoted with `\` and `"` escaped.
fn quote(s: &str) -> String {
    if is_plain_word(s) {
        return s.to_string();
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}
