//! The job-file reader: sections, `[global]` inheritance, comments, `include`, `${VAR}`.
//!
//! Structure follows fio's `__parse_jobs_ini` (HOWTO, "Job file format" and "Environment
//! variables"):
//! - a line whose first non-blank character is `;` or `#` is a comment; anywhere else on a line,
//!   `;` or `#` starts a trailing comment (fio cuts every line at the first of them, values
//!   included);
//! - `[name]` starts a section; a section whose name starts with `global` sets defaults for the
//!   jobs after it (and only those);
//! - `include <file>` pulls in option lines from another file (relative paths are tried as given,
//!   then next to the including file); included files may not contain sections. Job files and
//!   the files they include must be regular files of at most 16 MiB
//!   ([`crate::fsutil::MAX_INPUT_FILE_BYTES`]): a named pipe would block the read, a device such
//!   as `/dev/zero` would never end;
//! - `name=value` or `name` (options without a value), with blanks allowed around `=`;
//! - `${VAR}` anywhere in an option line is replaced by the variable's value. fio substitutes an
//!   empty string for an unset variable; here that is an error naming the variable, since an
//!   empty size or block size would only fail later with a less helpful message.

use std::path::{Path, PathBuf};

use super::job::{canonical_name, priority, FioJob, Outcome, RawOption};
use super::{Diagnostic, FioError};
use crate::units::shown;

/// Include files may nest, but not without end.
const MAX_INCLUDE_DEPTH: usize = 16;

/// A parsed job file.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFile {
    /// The job sections, in file order, each with its `[global]` defaults applied.
    pub jobs: Vec<FioJob>,
    /// Unknown or unmodelled options and other things worth telling the user.
    pub warnings: Vec<Diagnostic>,
    /// The options of all `[global]` sections as fio prints them under `"global options"` in its
    /// JSON output (which leaves out `numjobs`).
    pub global_options: Vec<(String, String)>,
}

/// Parses fio job text. `file` names the text in messages and anchors relative `include` paths;
/// `env` resolves `${VAR}`. Unknown options become warnings, bad values errors.
pub fn parse_job_text(
    text: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFile, FioError> {
    let mut lines = Vec::new();
    read_lines(text, file, 0, &mut lines)?;
    build(lines, env)
}

/// Reads and parses a job file, expanding `${VAR}` from the process environment.
pub fn parse_job_file(path: &Path) -> Result<JobFile, FioError> {
    let text = read_job_file(path).map_err(|error| FioError::Io {
        path: path.display().to_string(),
        error,
    })?;
    parse_job_text(&text, &path.display().to_string(), &|name| {
        std::env::var(name).ok()
    })
}

/// Reads a job file (or one it includes): a regular file of at most
/// [`MAX_INPUT_FILE_BYTES`](crate::fsutil::MAX_INPUT_FILE_BYTES).
pub fn read_job_file(path: &Path) -> Result<String, crate::fsutil::ReadError> {
    crate::fsutil::read_text(path, crate::fsutil::MAX_INPUT_FILE_BYTES, "fio job file")
}

/// A meaningful line: a section header or an option, with where it came from.
enum Line {
    Section {
        name: String,
        file: String,
        line: usize,
    },
    Option {
        text: String,
        file: String,
        line: usize,
    },
}

/// Collects section headers and option lines, following includes. `depth > 0` inside an
/// included file.
fn read_lines(text: &str, file: &str, depth: usize, out: &mut Vec<Line>) -> Result<(), FioError> {
    let syntax = |line: usize, message: String| FioError::Syntax {
        file: file.to_string(),
        line,
        message,
    };
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split([';', '#']).next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        if let Some(header) = content.strip_prefix('[') {
            if depth > 0 {
                return Err(syntax(
                    line,
                    "included files may not contain sections".into(),
                ));
            }
            let name = header
                .strip_suffix(']')
                .ok_or_else(|| syntax(line, format!("malformed section header '{}'", shown(content))))?;
            if name.is_empty() {
                return Err(syntax(line, "empty section name '[]'".into()));
            }
            out.push(Line::Section {
                name: name.to_string(),
                file: file.to_string(),
                line,
            });
        } else if let Some(target) = include_target(content) {
            if depth == 0 && out.is_empty() {
                return Err(syntax(
                    line,
                    format!("'{}' outside of any [section]", shown(content)),
                ));
            }
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(syntax(
                    line,
                    format!("includes nested more than {MAX_INCLUDE_DEPTH} deep"),
                ));
            }
            let path = resolve_path(target, file);
            let included = read_job_file(&path).map_err(|e| {
                syntax(line, format!("include {}: cannot read '{}': {e}", shown(target), shown(&path.display().to_string())))
            })?;
            read_lines(&included, &path.display().to_string(), depth + 1, out)?;
        } else {
            out.push(Line::Option {
                text: content.to_string(),
                file: file.to_string(),
                line,
            });
        }
    }
    Ok(())
}

fn include_target(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("include")?;
    rest.starts_with(char::is_whitespace).then(|| rest.trim())
}

/// A path a job file names (`include`, `dp_scheme`): fio tries an include's name as given
/// first, then relative to the including file's directory; other paths are found the same way.
pub(super) fn resolve_path(target: &str, naming_file: &str) -> PathBuf {
    let direct = PathBuf::from(target);
    if direct.exists() {
        return direct;
    }
    match Path::new(naming_file).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(target),
        _ => direct,
    }
}

/// Applies the collected lines section by section.
fn build(lines: Vec<Line>, env: &dyn Fn(&str) -> Option<String>) -> Result<JobFile, FioError> {
    let mut state = Builder {
        env,
        defaults: FioJob::default(),
        inherited: Vec::new(),
        file: JobFile {
            jobs: Vec::new(),
            warnings: Vec::new(),
            global_options: Vec::new(),
        },
    };
    let mut section: Option<(String, String, usize)> = None;
    let mut options: Vec<(String, String, usize)> = Vec::new();
    for line in lines {
        match line {
            Line::Section { name, file, line } => {
                if let Some(done) = section.take() {
                    state.section(done, std::mem::take(&mut options))?;
                }
                section = Some((name, file, line));
            }
            Line::Option { text, file, line } => {
                if section.is_none() {
                    return Err(FioError::Syntax {
                        file,
                        line,
                        message: format!("option '{}' outside of any [section]", shown(&text)),
                    });
                }
                options.push((text, file, line));
            }
        }
    }
    if let Some(done) = section {
        state.section(done, options)?;
    }
    Ok(state.file)
}

struct Builder<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    /// The job every new section starts from: fio's defaults with the `[global]` sections so far.
    defaults: FioJob,
    /// Options of the `[global]` sections so far.
    inherited: Vec<(String, String)>,
    file: JobFile,
}

/// Jobs one job file may define, clones of `numjobs` included: fio's own limit
/// (`REAL_MAX_JOBS` in `fio.h`: "error: maximum number of jobs reached").
pub const MAX_JOBS: u32 = 4096;

/// An option line split into canonical name and value.
struct Split {
    name: String,
    value: Option<String>,
    file: String,
    line: usize,
}

impl Builder<'_> {
    fn section(
        &mut self,
        (name, file, line): (String, String, usize),
        lines: Vec<(String, String, usize)>,
    ) -> Result<(), FioError> {
        let mut options = lines
            .into_iter()
            .map(|(text, file, line)| self.split(&text, file, line))
            .collect::<Result<Vec<_>, _>>()?;
        options.sort_by_key(|o| -priority(&o.name));

        // fio treats every section whose name starts with "global" as a global section.
        let global = name.starts_with("global");
        let mut job = if global {
            std::mem::take(&mut self.defaults)
        } else {
            FioJob {
                name,
                file,
                line,
                inherited_options: self.inherited.clone(),
                ..self.defaults.clone()
            }
        };

        let mut recorded = Vec::new();
        for option in &options {
            let raw = RawOption {
                name: &option.name,
                value: option.value.as_deref(),
                file: &option.file,
                line: option.line,
            };
            let outcome = job.apply(&raw, &mut self.file.warnings)?;
            let mut warn = |message: String| {
                self.file.warnings.push(Diagnostic {
                    file: option.file.clone(),
                    line: option.line,
                    message,
                })
            };
            match outcome {
                Outcome::Unknown => {
                    warn(format!("unknown option '{}' (ignored)", shown(&option.name)));
                    continue;
                }
                Outcome::NotModelled => warn(format!(
                    "option '{}' is not modelled by flashmux (ignored)",
                    option.name
                )),
                Outcome::Noted if !job.noted_unmodelled.contains(&option.name) => {
                    job.noted_unmodelled.push(option.name.clone());
                }
                Outcome::Noted | Outcome::Applied => {}
            }
            recorded.push((
                option.name.clone(),
                option.value.clone().unwrap_or_default(),
            ));
        }

        if global {
            self.file.global_options.extend(
                recorded
                    .iter()
                    .filter(|(name, _)| name != "numjobs")
                    .cloned(),
            );
            self.inherited.extend(recorded);
            self.defaults = job;
        } else {
            job.job_options = recorded;
            job.finish(&mut self.file.warnings)?;
            let jobs: u64 = self.file.jobs.iter().map(|j| u64::from(j.numjobs)).sum::<u64>() + u64::from(job.numjobs);
            if jobs > MAX_JOBS as u64 {
                return Err(FioError::Syntax {
                    file: job.file.clone(),
                    line: job.line,
                    message: format!(
                        "job '{}' brings the file to {jobs} jobs (numjobs counted): at most {MAX_JOBS}, as fio allows (REAL_MAX_JOBS)",
                        job.name
                    ),
                });
            }
            self.file.jobs.push(job);
        }
        Ok(())
    }

    /// Expands `${VAR}` over the whole line (as fio does) and splits it at the first `=`.
    fn split(&self, text: &str, file: String, line: usize) -> Result<Split, FioError> {
        let expanded = self.expand(text, &file, line)?;
        let (name, value) = match expanded.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
            None => (expanded.trim(), None),
        };
        if name.is_empty() {
            return Err(FioError::Syntax {
                file,
                line,
                message: format!("missing option name in '{}'", shown(text)),
            });
        }
        Ok(Split {
            name: canonical_name(name).to_string(),
            value,
            file,
            line,
        })
    }

    fn expand(&self, text: &str, file: &str, line: usize) -> Result<String, FioError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            // Without a closing brace the text stays as it is, as in fio.
            let Some(end) = after.find('}') else { break };
            let name = &after[..end];
            let value = (!name.is_empty())
                .then(|| (self.env)(name))
                .flatten()
                .ok_or_else(|| FioError::MissingEnvVar {
                    file: file.to_string(),
                    line,
                    name: name.to_string(),
                })?;
            out.push_str(&rest[..start]);
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> JobFile {
        parse_job_text(text, "jobs.fio", &no_env).expect("parses")
    }

    fn error(text: &str) -> String {
        parse_job_text(text, "jobs.fio", &no_env)
            .expect_err("must fail")
            .to_string()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// A scratch directory for include tests, unique per test and process.
    fn scratch_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flashmux-fio-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn global_sections_apply_to_the_jobs_below_them_only() {
        let file = parse(
            "[global]\nrw=randread\nsize=128m\n\n[job1]\n\n[global]\nbs=8k\n[job2]\nrw=write\n",
        );
        let (j1, j2) = (&file.jobs[0], &file.jobs[1]);
        assert_eq!((j1.name.as_str(), j1.line), ("job1", 5));
        assert_eq!(j1.rw.fio_name(), "randread");
        assert_eq!(j1.bs.read, 4096);
        assert_eq!(j2.rw.fio_name(), "write");
        assert_eq!(j2.bs.read, 8192);
        assert_eq!(j2.size, j1.size);
        // A section whose name starts with "global" is global, as in fio.
        let file = parse("[global-defaults]\nbs=16k\n[a]\n");
        assert_eq!((file.jobs.len(), file.jobs[0].bs.read), (1, 16384));
    }

    #[test]
    fn comments_and_whitespace() {
        let file = parse(
            "; leading comment\n  # indented comment\n[ job ] ; a job\n  bs = 8k   # trailing\n\
             size=1m;another\n\trw\t=\twrite\n\n",
        );
        let job = &file.jobs[0];
        assert_eq!(job.name, " job ");
        assert_eq!(
            (job.bs.read, job.size.unwrap()),
            (8192, super::super::SizeSpec::Bytes(1 << 20))
        );
        assert_eq!(job.rw.fio_name(), "write");
        assert_eq!(
            job.job_options,
            pairs(&[("bs", "8k"), ("size", "1m"), ("rw", "write")])
        );
        assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    }

    #[test]
    fn options_without_values() {
        let job = &parse("[j]\nruntime=10\ntime_based\nnorandommap\nstonewall\n").jobs[0];
        assert!(job.time_based && job.norandommap && job.stonewall);
        assert_eq!(
            job.job_options[1],
            ("time_based".to_string(), String::new())
        );
    }

    #[test]
    fn environment_variables() {
        let env = |name: &str| match name {
            "SIZE" => Some("64m".to_string()),
            "NUMJOBS" => Some("4".to_string()),
            "OPT" => Some("iodepth".to_string()),
            _ => None,
        };
        let file = parse_job_text(
            "[w]\nsize=${SIZE}\nnumjobs=${NUMJOBS}\n${OPT}=8\nbs=${X\n",
            "e.fio",
            &env,
        );
        let e = file.expect_err("${X without a brace is kept literally and is not a size");
        assert!(e.to_string().contains("invalid value '${X'"), "{e}");
        let file = parse_job_text(
            "[w]\nsize=${SIZE}\nnumjobs=${NUMJOBS}\n${OPT}=8\n",
            "e.fio",
            &env,
        )
        .unwrap();
        let job = &file.jobs[0];
        assert_eq!(job.size, Some(super::super::SizeSpec::Bytes(64 << 20)));
        assert_eq!((job.numjobs, job.iodepth), (4, 8));
        assert_eq!(job.job_options[0], ("size".to_string(), "64m".to_string()));
        let e = parse_job_text("[w]\n\nsize=${NOPE}\n", "e.fio", &env).unwrap_err();
        assert_eq!(
            e.to_string(),
            "e.fio:3: environment variable 'NOPE' is not set (used as ${NOPE})"
        );
        assert!(matches!(e, FioError::MissingEnvVar { ref name, line: 3, .. } if name == "NOPE"));
    }

    #[test]
    fn unknown_options_warn_with_their_line() {
        let file = parse("[j]\nbs=4k\nfrobnicate=3\n");
        assert_eq!(file.warnings.len(), 1);
        assert_eq!(
            file.warnings[0].to_string(),
            "jobs.fio:3: unknown option 'frobnicate' (ignored)"
        );
        assert!(file.jobs[0]
            .job_options
            .iter()
            .all(|(n, _)| n != "frobnicate"));
    }

    #[test]
    fn unmodelled_options_are_noted_once_and_inherited() {
        let file = parse(
            "[global]\ndirect=1\nioengine=libaio\n[a]\nfilename=/dev/nvme0n1\ndirect=0\n\
             verify=crc32c\n[b]\n",
        );
        // In fio's parse order, which puts filename last.
        assert_eq!(
            file.jobs[0].noted_unmodelled,
            vec!["ioengine", "verify", "filename"]
        );
        assert_eq!(file.jobs[1].noted_unmodelled, vec!["ioengine"]);
        assert_eq!((file.jobs[0].direct, file.jobs[1].direct), (false, true), "direct is modelled and inherited");
        assert!(file.warnings.is_empty());
    }

    #[test]
    fn option_lists_follow_fio() {
        let file = parse(
            "[global]\nnumjobs=2\nblocksize=8k\n[a]\nfilename=/dev/x\nreadwrite=randread\n\
             kb_base=1000\nio_limit=1g\n",
        );
        let job = &file.jobs[0];
        // Canonical names; kb_base (priority 1) first and filename (priority -1) last.
        assert_eq!(
            job.job_options,
            pairs(&[
                ("kb_base", "1000"),
                ("rw", "randread"),
                ("io_size", "1g"),
                ("filename", "/dev/x")
            ])
        );
        assert_eq!(
            job.inherited_options,
            pairs(&[("numjobs", "2"), ("bs", "8k")])
        );
        assert_eq!(file.global_options, pairs(&[("bs", "8k")]));
        assert_eq!(job.all_options().count(), 6);
        assert_eq!(job.io_size, Some(1_000_000_000));
        // Global sizes were parsed with the global kb_base.
        assert_eq!(job.bs.read, 8192);
    }

    #[test]
    fn name_option_overrides_the_section_name() {
        let file = parse("[global]\nname=g\n[a]\n[b]\nname=custom\n");
        assert_eq!(file.jobs[0].name, "a");
        assert_eq!(file.jobs[1].name, "custom");
    }

    #[test]
    fn bad_values_name_file_line_option_and_expectation() {
        let text = "[global]\nrw=randwrite\n\n[job]\n; comment\nsize=1g\nbs=4q\n";
        assert_eq!(
            error(text),
            "jobs.fio:7: option 'bs': invalid value '4q': expected a size such as 4k, 64KiB or 4096"
        );
        let e = parse_job_text(text, "jobs.fio", &no_env).unwrap_err();
        assert!(matches!(e, FioError::InvalidValue { line: 7, ref option, .. } if option == "bs"));
    }

    #[test]
    fn control_characters_in_values_and_names_are_shown_escaped() {
        // A NUL inside a value is invisible on a terminal: 'wr\0ite' looked like 'write'.
        let e = error("[j]\nrw=wr\0ite\n");
        assert!(e.starts_with("jobs.fio:2: option 'rw': invalid value 'wr\\0ite': expected one of"), "{e}");
        let e = error("[j]\nbs=4\x1bk\n");
        assert!(e.starts_with("jobs.fio:2: option 'bs': invalid value '4\\u{1b}k'"), "{e}");
        let file = parse("[j]\nfrob\tnicate=1\n");
        assert_eq!(file.warnings[0].to_string(), "jobs.fio:2: unknown option 'frob\\tnicate' (ignored)");
        assert_eq!(error("[j\x07\n"), "jobs.fio:1: malformed section header '[j\\u{7}'");
    }

    #[test]
    fn malformed_files() {
        assert_eq!(
            error("bs=4k\n[j]\n"),
            "jobs.fio:1: option 'bs=4k' outside of any [section]"
        );
        assert_eq!(
            error("[j\nbs=4k\n"),
            "jobs.fio:1: malformed section header '[j'"
        );
        assert_eq!(error("\n[]\n"), "jobs.fio:2: empty section name '[]'");
        assert!(error("[j]\n=4k\n").contains("missing option name"));
        assert!(error("[j]\nrw=sideways\n")
            .contains("jobs.fio:2: option 'rw': invalid value 'sideways'"));
        assert!(parse("").jobs.is_empty());
    }

    #[test]
    fn missing_file_names_the_path_and_the_os_error() {
        let path = Path::new("/nonexistent/flashmux/jobs.fio");
        let message = parse_job_file(path).unwrap_err().to_string();
        assert!(
            message.contains("/nonexistent/flashmux/jobs.fio"),
            "{message}"
        );
        assert!(message.contains("No such file or directory"), "{message}");
    }

    #[test]
    fn job_files_from_disk_and_includes() {
        let dir = scratch_dir("include");
        std::fs::write(dir.join("glob-include.fio"), "; shared\nthread=1\nbs=16k\n").unwrap();
        std::fs::write(
            dir.join("test-include.fio"),
            "iodepth=4\ninclude nested.fio\n",
        )
        .unwrap();
        std::fs::write(dir.join("nested.fio"), "numjobs=3\n").unwrap();
        std::fs::write(
            dir.join("main.fio"),
            "[global]\nfilesize=1m\ninclude glob-include.fio\n\n[test]\nrw=randread\n\
             include test-include.fio\nruntime=10\n",
        )
        .unwrap();
        let file = parse_job_file(&dir.join("main.fio")).unwrap();
        let job = &file.jobs[0];
        assert_eq!((job.bs.read, job.iodepth, job.numjobs), (16384, 4, 3));
        assert_eq!(job.runtime, Some(10_000_000_000));
        assert_eq!(job.noted_unmodelled, vec!["thread"]);

        std::fs::write(dir.join("bad.fio"), "[nope]\n").unwrap();
        std::fs::write(dir.join("uses-bad.fio"), "[j]\ninclude bad.fio\n").unwrap();
        let e = parse_job_file(&dir.join("uses-bad.fio"))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("bad.fio:1: included files may not contain sections"),
            "{e}"
        );
        std::fs::write(dir.join("loop.fio"), "[j]\ninclude self.fio\n").unwrap();
        std::fs::write(dir.join("self.fio"), "include self.fio\n").unwrap();
        let e = parse_job_file(&dir.join("loop.fio"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nested more than"), "{e}");
        let e = error("include glob-include.fio\n[j]\n");
        assert!(e.contains("outside of any [section]"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    use crate::error_chain as chain;

    /// Parses `text` on another thread: a read that blocks fails the test instead of hanging it.
    fn parse_within_seconds(text: &str, file: &str) -> Result<JobFile, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (text, file) = (text.to_string(), file.to_string());
        std::thread::spawn(move || {
            let _ = tx.send(parse_job_text(&text, &file, &no_env).map_err(|e| chain(&e)));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the parse blocked")
    }

    #[test]
    fn a_missing_include_names_the_including_line_and_the_path_once() {
        let e = parse_within_seconds("[j]\nrw=read\ninclude /nonexistent/x.fio\n", "t.fio").unwrap_err();
        assert_eq!(
            e,
            "t.fio:3: include /nonexistent/x.fio: cannot read '/nonexistent/x.fio': No such file or directory (os error 2)"
        );
        let e = parse_job_file(Path::new("/nonexistent/j.fio")).unwrap_err();
        assert_eq!(
            chain(&e),
            "cannot read job file '/nonexistent/j.fio': No such file or directory (os error 2)"
        );
    }

    #[cfg(unix)]
    #[test]
    fn includes_of_pipes_devices_and_huge_files_are_refused_without_reading_them() {
        let dir = scratch_dir("include-special");
        let fifo = dir.join("pipe.fio");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = parse_within_seconds(&format!("[j]\ninclude {}\n", fifo.display()), "t.fio").unwrap_err();
        assert_eq!(
            e,
            format!("t.fio:2: include {0}: cannot read '{0}': it is a named pipe (FIFO), not a regular file", fifo.display())
        );
        let e = parse_within_seconds("[j]\n\ninclude /dev/zero\n", "t.fio").unwrap_err();
        assert_eq!(
            e,
            "t.fio:3: include /dev/zero: cannot read '/dev/zero': it is a character device, not a regular file"
        );
        let big = dir.join("big.fio");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(crate::fsutil::MAX_INPUT_FILE_BYTES + 1).unwrap();
        let e = parse_within_seconds(&format!("[j]\ninclude {}\n", big.display()), "t.fio").unwrap_err();
        assert!(e.starts_with("t.fio:2: include ") && e.ends_with("it is 16777217 bytes; a fio job file may have at most 16.00 MiB (16777216 bytes)"), "{e}");
        let e = parse_job_file(&fifo).unwrap_err().to_string();
        assert!(e.ends_with("pipe.fio': it is a named pipe (FIFO), not a regular file"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    proptest! {
        #[test]
        fn arbitrary_printable_text_never_panics(text in "[ -~\t\n]{0,400}") {
            let _ = parse_job_text(&text, "p.fio", &|_| Some("1".to_string()));
        }

        #[test]
        fn arbitrary_option_lines_never_panic(
            lines in proptest::collection::vec(
                ("[a-z_]{1,12}", "[ -~]{0,24}"), 0..12)
        ) {
            let mut text = String::from("[j]\n");
            for (name, value) in &lines {
                text.push_str(&format!("{name}={value}\n"));
            }
            let _ = parse_job_text(&text, "p.fio", &|_| Some("4k".to_string()));
        }
    }
}
