//! The generated scenario's text: its sections in a fixed order, each key with the comments above
//! it, and the warnings that go with its approximations. A key that approximates MQSim has a
//! `# approximated: <why>` line above it and a warning naming the MQSim parameter's file and
//! line; an approximation that writes no key (flashmux has nothing to set) is the comment alone.

use super::xml::Loc;

/// A section: its header (`""` for the top level), and its lines.
struct Section {
    id: String,
    header: String,
    lines: Vec<String>,
}

/// A scenario file being written, and the warnings of its approximations.
#[derive(Default)]
pub(super) struct Toml {
    sections: Vec<Section>,
    pub warnings: Vec<String>,
}

/// A TOML string.
pub(super) fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A duration in the largest unit that keeps it exact (flashmux's duration syntax).
pub(super) fn duration(ns: u64) -> String {
    match ns {
        0 => "0ns".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// A size in the largest binary unit that keeps it exact.
pub(super) fn size(bytes: u64) -> String {
    match bytes {
        0 => "0".into(),
        b if b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => b.to_string(),
    }
}

impl Toml {
    /// The section `id` (`device.timing`, `tenant.0`), made with `header` if it is new.
    fn section(&mut self, id: &str, header: &str) -> &mut Section {
        match self.sections.iter().position(|s| s.id == id) {
            Some(i) => &mut self.sections[i],
            None => {
                self.sections.push(Section { id: id.into(), header: header.into(), lines: Vec::new() });
                self.sections.last_mut().expect("just pushed")
            }
        }
    }

    /// `[id]`, or for `tenant.N` the N-th `[[tenant]]`.
    fn lines(&mut self, id: &str) -> &mut Vec<String> {
        let header = match id {
            "" => String::new(),
            t if t.starts_with("tenant.") => "[[tenant]]".into(),
            s => format!("[{s}]"),
        };
        &mut self.section(id, &header).lines
    }

    /// `key = value` (`value` is TOML already).
    pub fn set(&mut self, id: &str, key: &str, value: impl std::fmt::Display) {
        self.lines(id).push(format!("{key} = {value}"));
    }

    /// A comment line.
    pub fn note(&mut self, id: &str, text: &str) {
        self.lines(id).push(format!("# {text}"));
    }

    /// `key = value`, an approximation of the parameter at `loc` for the reason `why`.
    pub fn approx(&mut self, id: &str, key: &str, value: impl std::fmt::Display, loc: &Loc, why: &str) {
        self.approx_note(id, loc, why);
        self.set(id, key, value);
    }

    /// An approximation that writes no key: its comment in section `id`, and its warning.
    pub fn approx_note(&mut self, id: &str, loc: &Loc, why: &str) {
        let warning = loc.warning(why);
        self.lines(id).push(format!("# approximated: {}: {why}", loc.element));
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for s in &self.sections {
            if !s.header.is_empty() {
                out.push('\n');
                out.push_str(&s.header);
                out.push('\n');
            }
            for l in &s.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_exact() {
        assert_eq!(duration(10_000_000_000), "10s");
        assert_eq!(duration(3_800_000), "3800us");
        assert_eq!(duration(75_020), "75020ns");
        assert_eq!(size(268_435_456), "256MiB");
        assert_eq!(size(8192), "8KiB");
        assert_eq!(size(1536), "1536");
    }

    #[test]
    fn an_approximation_has_its_comment_above_its_key_and_one_warning() {
        let mut t = Toml::default();
        t.set("", "seed", 1);
        let loc = Loc::new("ssd.xml", Some(7), "GC_Hard_Threshold");
        t.approx("device.ftl", "gc_threshold_blocks", 9, &loc, "rounded");
        t.approx_note("device.ftl", &loc, "rounded");
        assert_eq!(
            t.render(),
            "seed = 1\n\n[device.ftl]\n# approximated: GC_Hard_Threshold: rounded\ngc_threshold_blocks = 9\n# approximated: GC_Hard_Threshold: rounded\n"
        );
        assert_eq!(t.warnings, vec!["ssd.xml:7: GC_Hard_Threshold: rounded".to_string()]);
    }
}
