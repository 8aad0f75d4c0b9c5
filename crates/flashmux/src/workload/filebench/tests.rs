use super::*;
use proptest::prelude::*;

fn parse(text: &str) -> Workload {
    let file = parse_wml(text, "w.f").unwrap_or_else(|e| panic!("{e}"));
    file.workload.check_invariants();
    file.workload
}

fn error(text: &str) -> String {
    parse_wml(text, "w.f").expect_err("must fail").to_string()
}

fn kinds(t: &Thread) -> Vec<&'static str> {
    t.flowops.iter().map(|f| f.kind.name()).collect()
}

/// The workload with every line number set to 0: printing and reading back moves lines.
fn erase_lines(mut w: Workload) -> Workload {
    w.filesets.iter_mut().for_each(|f| f.line = 0);
    for p in &mut w.processes {
        p.line = 0;
        for t in &mut p.threads {
            t.line = 0;
            t.flowops.iter_mut().for_each(|f| f.line = 0);
        }
    }
    w
}

fn round_trip(w: &Workload) {
    let text = to_wml(w);
    let again = parse_wml(&text, "printed.f").unwrap_or_else(|e| panic!("{e}\n{text}"));
    again.workload.check_invariants();
    assert_eq!(to_wml(&again.workload), text, "printing is stable");
    assert_eq!(erase_lines(again.workload), erase_lines(w.clone()), "{text}");
}

/// A one-thread workload around `flowops` with a fileset `fs` of 10 files.
fn with_flowops(flowops: &str) -> String {
    format!(
        "define fileset name=fs,path=/tmp,entries=10,dirwidth=5,size=4k\n\
         define process name=p\n{{\n  thread name=t\n  {{\n{flowops}\n  }}\n}}\n"
    )
}

#[test]
fn fileserver_is_filebenchs_fileserver() {
    let w = parse(personality("fileserver").unwrap());
    // fileserver.f: one fileset of $nfiles = 10000 files, $meandirwidth = 20, $meanfilesize =
    // 128k = 131072 bytes, prealloc=80, gammas at Filebench's default 1500.
    assert_eq!(w.filesets.len(), 1);
    let fs = &w.filesets[0];
    assert_eq!((fs.name.as_str(), fs.path.as_str(), fs.kind), ("bigfileset", "/tmp", FilesetKind::Fileset));
    assert_eq!((fs.entries, fs.dirwidth, fs.mean_size, fs.prealloc_percent), (10_000, 20, 131_072, 80));
    assert_eq!((fs.size_gamma, fs.dir_gamma), (1500, 1500));
    assert!(!fs.reuse && !fs.readonly && !fs.paralloc);
    // One process of one instance; one thread of $nthreads = 50 instances, memsize 10m.
    assert_eq!(w.processes.len(), 1);
    let p = &w.processes[0];
    assert_eq!((p.name.as_str(), p.instances, p.threads.len()), ("filereader", 1, 1));
    let t = &p.threads[0];
    assert_eq!((t.name.as_str(), t.instances, t.memsize), ("filereaderthread", 50, Some(10 << 20)));
    assert_eq!(
        kinds(t),
        [
            "createfile",
            "writewholefile",
            "closefile",
            "openfile",
            "appendfilerand",
            "closefile",
            "openfile",
            "readwholefile",
            "closefile",
            "deletefile",
            "statfile"
        ]
    );
    let write = &t.flowops[1].attrs;
    assert_eq!((write.fd, write.srcfd, write.iosize), (Some(1), Some(1), Some(1 << 20)));
    assert_eq!(t.flowops[4].attrs.iosize, Some(16 << 10));
    assert_eq!(t.flowops[9].attrs.fileset.as_deref(), Some("bigfileset"));
    assert_eq!(w.run, Some(Run::Run { seconds: Some(60) }));
    assert_eq!(w.quit_mode, QuitMode::Timeout);
    assert_eq!(w.variables.len(), 8);
    assert_eq!(w.variables["meanfilesize"], Value::Int(131_072));
    assert_eq!(w.variables["dir"], Value::Str("/tmp".into()));
    assert!(t.flowops.iter().all(|f| f.kind.support() == Support::Modelled));
}

#[test]
fn varmail_is_filebenchs_varmail() {
    let w = parse(personality("varmail").unwrap());
    let fs = &w.filesets[0];
    // $nfiles = 1000 in one flat directory ($meandirwidth = 1000000), mean 16k = 16384 bytes.
    assert_eq!((fs.entries, fs.dirwidth, fs.mean_size, fs.prealloc_percent), (1000, 1_000_000, 16_384, 80));
    let t = &w.processes[0].threads[0];
    assert_eq!(t.instances, 16);
    assert_eq!(
        kinds(t),
        [
            "deletefile",
            "createfile",
            "appendfilerand",
            "fsync",
            "closefile",
            "openfile",
            "readwholefile",
            "appendfilerand",
            "fsync",
            "closefile",
            "openfile",
            "readwholefile",
            "closefile"
        ]
    );
    assert_eq!(t.flowops[3].attrs.fd, Some(1));
    assert_eq!(t.flowops[6].attrs.iosize, Some(1 << 20));
    assert_eq!(w.run, Some(Run::Run { seconds: Some(60) }));
}

#[test]
fn webproxy_is_filebenchs_webproxy() {
    let w = parse(personality("webproxy").unwrap());
    let fs = &w.filesets[0];
    assert_eq!((fs.entries, fs.dirwidth, fs.mean_size, fs.prealloc_percent), (10_000, 1_000_000, 16_384, 80));
    let t = &w.processes[0].threads[0];
    assert_eq!((w.processes[0].name.as_str(), t.name.as_str(), t.instances), ("proxycache", "proxycache", 100));
    // delete, create + append + close, five open/readwhole/close, opslimit: 4 + 15 + 1 = 20.
    let k = kinds(t);
    assert_eq!(k.len(), 20);
    assert_eq!(k[..4], ["deletefile", "createfile", "appendfilerand", "closefile"]);
    for i in 0..5 {
        assert_eq!(k[4 + 3 * i..7 + 3 * i], ["openfile", "readwholefile", "closefile"], "read {i}");
    }
    assert_eq!(k[19], "opslimit");
    assert_eq!(t.flowops[2].attrs.iosize, Some(16_384));
    assert_eq!(t.flowops[19].kind.support(), Support::NoEffect);
}

#[test]
fn webserver_is_filebenchs_webserver() {
    let w = parse(personality("webserver").unwrap());
    let (pages, log) = (&w.filesets[0], &w.filesets[1]);
    assert_eq!((pages.entries, pages.dirwidth, pages.mean_size, pages.prealloc_percent), (1000, 20, 16_384, 100));
    assert!(pages.readonly);
    // The log: one entry, bare prealloc = 100%.
    assert_eq!((log.name.as_str(), log.entries, log.prealloc_percent, log.readonly), ("logfiles", 1, 100, false));
    let t = &w.processes[0].threads[0];
    assert_eq!(t.instances, 100);
    // Ten open/readwhole/close triples and the log append: 31 flowops.
    assert_eq!(t.flowops.len(), 31);
    assert_eq!(t.flowops[27].name, "openfile10");
    let log_append = &t.flowops[30];
    assert_eq!((log_append.kind, log_append.name.as_str()), (FlowopKind::AppendFileRand, "appendlog"));
    assert_eq!((log_append.attrs.fileset.as_deref(), log_append.attrs.fd), (Some("logfiles"), Some(2)));
}

#[test]
fn personality_lookup() {
    assert_eq!(personality_names().collect::<Vec<_>>(), ["fileserver", "varmail", "webproxy", "webserver"]);
    assert!(personality("oltp").is_none());
    for name in personality_names() {
        let file = parse_wml(personality(name).unwrap(), name).unwrap();
        assert!(file.warnings.is_empty(), "{name}: {:?}", file.warnings);
        round_trip(&file.workload);
    }
}

#[test]
fn variables_resolve_to_their_last_assignment() {
    let w = parse(&format!(
        "set $n = 5\nset $io = 8k\nset $name = \"my set\"\nset $sync = true\n{}\nset $n = 7\nrun $secs\nset $secs = 30\n",
        with_flowops("flowop read name=r,filesetname=fs,iosize=$io,iters=$n,dsync=$sync,target=r")
    ));
    let r = &w.processes[0].threads[0].flowops[0].attrs;
    // $n is 7 at the end of the file; $io = 8 * 1024.
    assert_eq!((r.iosize, r.iters, r.dsync), (Some(8192), 7, true));
    assert_eq!(w.run, Some(Run::Run { seconds: Some(30) }));
    assert_eq!(w.variables["name"], Value::Str("my set".into()));
    // A string where a number goes.
    let e = error(&format!("set $io = fast\n{}", with_flowops("flowop read name=r,filesetname=fs,iosize=$io")));
    assert_eq!(e, "w.f:7: flowop read 'r': attribute 'iosize': invalid value 'fast': expected a size of at least 1 byte (16k, 1m, 4096)");
}

#[test]
fn syntax_follows_filebench() {
    // Statements span lines, comments anywhere, quoted names, filesize = size, filename =
    // filesetname, define file, boolean attributes given numbers, mode and psrun.
    let w = parse(
        "# header\nset mode quit alldone\ndefine file name=\"big file\",path=/data, # comment\n  filesize=1g,prealloc,reuse\n\
         define process name=p,instances=2 {\n thread name=t,useism {\n  flowop read name=r,filename=\"big file\",\n    \
         iosize=1m,random,directio=0\n  flowop finishoncount name=done,value=100\n  flowop fsync name=sync\n }\n}\ncreate files\npsrun -10 60\n",
    );
    let f = &w.filesets[0];
    assert_eq!((f.kind, f.entries, f.dirwidth, f.size_gamma, f.mean_size), (FilesetKind::File, 1, 10, 0, 1 << 30));
    assert_eq!((f.prealloc_percent, f.reuse, f.line), (100, true, 3));
    let t = &w.processes[0].threads[0];
    assert!(t.useism);
    let r = &t.flowops[0];
    assert_eq!(
        (r.line, r.attrs.fileset.as_deref(), r.attrs.random, r.attrs.directio),
        (7, Some("big file"), true, false)
    );
    assert_eq!(t.flowops[1].attrs.value, Some(100));
    // No fd: the thread's default descriptor, as in Filebench (filemicro_writefsync.f).
    assert_eq!(
        (t.flowops[2].kind, t.flowops[2].attrs.fd, t.flowops[2].attrs.fileset.as_deref()),
        (FlowopKind::Fsync, None, None)
    );
    assert_eq!((w.quit_mode, w.run), (QuitMode::AllDone, Some(Run::Psrun { interval: -10, seconds: 60 })));
    round_trip(&w);
}

#[test]
fn ignored_commands_warn_with_their_line() {
    let file = parse_wml(
        &format!(
            "echo \"hi $x\"\nusage \"set \\$dir\"\n\nenable lathist\n{}",
            with_flowops("flowop statfile name=s,filesetname=fs")
        ),
        "w.f",
    )
    .unwrap();
    let shown: Vec<String> = file.warnings.iter().map(|d| d.to_string()).collect();
    assert_eq!(shown, ["w.f:4: enable lathist: latency histograms are not kept (ignored)"]);
}

#[test]
fn errors_name_file_line_and_what() {
    let cases: &[(&str, &str)] = &[
        ("set $a = 1\n\ndefine fileset name=x,path=$nope,entries=1,dirwidth=1\n", "w.f:3: unknown variable '$nope'"),
        (&with_flowops("flowop read name=r,filesetname=fs,iosize=16q"), "w.f:6: bad size or number '16q': expected digits with an optional k, m or g suffix (16k, 1m, 1g, 4096)"),
        (&with_flowops("flowop read name=r,filesetname=fs,iosize=16K"), "w.f:6: bad size or number '16K': expected digits with an optional k, m or g suffix (16k, 1m, 1g, 4096)"),
        (&with_flowops("flowop read name=r,filesetname=other,iosize=4k"), "w.f:6: no fileset or file named 'other' is defined"),
        (&with_flowops("flowop read name=r,fd=129,iosize=4k"), "w.f:6: flowop read 'r': attribute 'fd': invalid value '129': expected a file descriptor from 1 to 128"),
        (&with_flowops("flowop closefile name=c,fd=0"), "w.f:6: flowop closefile 'c': attribute 'fd': invalid value '0': expected a file descriptor from 1 to 128"),
        (&with_flowops("flowop read name=r,fd=1,iosize=0"), "w.f:6: flowop read 'r': attribute 'iosize': invalid value '0': expected a size of at least 1 byte (16k, 1m, 4096)"),
        (&with_flowops("flowop read name=r,fd=1"), "w.f:6: flowop read 'r': needs iosize"),
        (&with_flowops("flowop openfile name=o,fd=1"), "w.f:6: flowop openfile 'o': needs filesetname"),
        (&with_flowops("flowop sempost name=s,value=1,target=nobody"), "w.f:6: target 'nobody': no flowop has that name"),
        (&with_flowops("flowop frob name=f"), "w.f:6: unknown flowop 'frob': expected one of createfile, openfile, closefile, deletefile, statfile, readwholefile, writewholefile, appendfile, appendfilerand, read, write, fsync, fsyncset, opslimit, iopslimit, bwlimit, eventlimit, finishoncount, finishonbytes, delay, hog, semblock, sempost, block, wakeup"),
        (&with_flowops("flowop aiowrite name=a,filesetname=fs"), "w.f:6: flowop aiowrite is not supported: asynchronous I/O is not modelled"),
        (&with_flowops("flowop statfile name=s,filesetname=fs\nflowop statfile name=s,filesetname=fs"), "w.f:7: thread 't': flowop 's' is defined twice"),
        (&with_flowops("flowop statfile name=s,filesetname=fs,colour=red"), "w.f:6: flowop statfile: unknown attribute 'colour': expected one of name, filesetname, filename, fd, srcfd, iosize, iters, random, dsync, directio, workingset, value, target, indexed, blocking, highwater, opennext, noreadahead"),
        ("define process name=p,instances=0 { thread name=t { flowop delay name=d,value=1 } }", "w.f:1: define process 'p': attribute 'instances': invalid value '0': expected a number of instances of at least 1"),
        ("define process name=p\n{\n  thread name=t\n  {\n  }\n}\n", "w.f:3: thread 't' has no flowops"),
        ("define process name=p\n{\n  thread name=t\n  {\n    flowop delay name=d,value=1\n", "w.f:4: unterminated '{' of thread: the file ends before its '}'"),
        ("define process name=p\n{\n  thread name=t\n  {\n    flowop delay name=d,value=1\n  }\n", "w.f:2: unterminated '{' of define process: the file ends before its '}'"),
        ("define fileset name=a,path=/t,entries=1,dirwidth=1\n\ndefine fileset name=a,path=/u,entries=2,dirwidth=1\n", "w.f:3: fileset 'a' is defined twice"),
        ("define fileset name=a,path=/t,dirwidth=1\n", "w.f:1: define fileset 'a': needs entries="),
        ("define fileset name=a,path=/t,entries=1,dirwidth=1,prealloc=101\n", "w.f:1: define fileset 'a': attribute 'prealloc': invalid value '101': expected a percentage from 0 to 100"),
        ("\nset $filesize=cvar(type=cvar-gamma,parameters=mean:16384;gamma:1.5)\n", "w.f:2: set $filesize = cvar(...) is not supported: random variables (Filebench 1.5 cvar, randvar) are not supported; give a number"),
        ("define randvar name=$rv,type=gamma,mean=16k\n", "w.f:1: define randvar is not supported: random variables are not supported; give a number"),
        ("\n\neventgen rate=10\n", "w.f:3: eventgen is not supported: rate-driven runs (an event generator) are not modelled"),
        ("set $x = \"unterminated\n", "w.f:1: unterminated quoted string (no closing '\"')"),
        ("run 10\nrun 20\n", "w.f:2: a second run or psrun: a workload runs once"),
        ("frobnicate\n", "w.f:1: unknown command 'frobnicate'"),
        ("\necho hello\n", "w.f:2: expected a quoted string after echo, found 'hello'"),
        ("set\n", "w.f:1: expected a $variable or mode after set, found the end of the file"),
        ("define process name=p { thread name=t { flowop delay name=d } }\nrun \"x\"\n", "w.f:2: expected a command (set, define, run, ...), found \"x\""),
        ("}\n", "w.f:1: expected a command (set, define, run, ...), found '}'"),
        ("set $x = 99999999999999999999\n", "w.f:1: number '99999999999999999999' is too large: the largest is 18446744073709551615"),
        ("set $x = 17179869184g\n", "w.f:1: number '17179869184g' is too large: the largest is 18446744073709551615"),
        ("define fileset name=a,path=/t,entries=1,dirwidth=1,leafdirs=4\n", "w.f:1: define fileset: attribute 'leafdirs' is not supported: filesets of leaf directories are not supported"),
        ("set $a = 1 @\n", "w.f:1: unexpected character '@'"),
    ];
    for (text, expected) in cases {
        assert_eq!(&error(text), expected, "{text}");
    }
    let e = parse_wml("\n\nrun $t\n", "w.f").unwrap_err();
    assert!(matches!(e, WmlError::UnknownVariable { line: 3, ref name, .. } if name == "t"), "{e:?}");
}

#[test]
fn support_marks_what_a_model_cannot_run() {
    use FlowopKind::*;
    for kind in FlowopKind::ALL {
        let expected = match kind {
            OpsLimit | IopsLimit | BwLimit | EventLimit => "no effect",
            Hog | SemBlock | SemPost | Block | Wakeup => "unmodelled",
            _ => "modelled",
        };
        let got = match kind.support() {
            Support::Modelled => "modelled",
            Support::NoEffect => "no effect",
            Support::Unmodelled(_) => "unmodelled",
        };
        assert_eq!(got, expected, "{kind}");
    }
    // Unmodelled flowops still parse, typed, for the runner to refuse.
    let w = parse(&with_flowops(
        "flowop semblock name=b,value=3200,highwater=1000\nflowop sempost name=p,value=1,target=b,blocking\nflowop hog name=h,value=10000",
    ));
    let ops = &w.processes[0].threads[0].flowops;
    assert_eq!((ops[0].attrs.value, ops[0].attrs.highwater), (Some(3200), Some(1000)));
    assert_eq!((ops[1].attrs.target.as_deref(), ops[1].attrs.blocking), (Some("b"), true));
}

#[test]
fn a_missing_file_names_its_path() {
    let e = parse_wml_file(std::path::Path::new("/nonexistent/x.f")).unwrap_err();
    assert_eq!(e.to_string(), "cannot read workload file '/nonexistent/x.f': No such file or directory (os error 2)");
}

/// Valid WML from parts: filesets fs0..fsN, processes of threads of flowops drawn from templates
/// that are valid against them, values sometimes through variables, names sometimes quoted.
fn valid_wml() -> impl Strategy<Value = String> {
    let fileset = (1u64..5000, 1u64..100, 0u64..(1 << 20), prop::option::of(0u64..=100), any::<bool>(), any::<bool>());
    let flowop = (0usize..9, 1u64..(1 << 20), 1u32..=128, any::<bool>());
    let thread = (1u64..64, prop::collection::vec(flowop, 1..6));
    let process = (1u64..4, prop::collection::vec(thread, 1..3));
    (
        prop::collection::vec(fileset, 1..4),
        prop::collection::vec(process, 1..3),
        prop::option::of(0u64..3600),
        any::<bool>(),
    )
        .prop_map(|(filesets, processes, run, quoted)| {
            let mut s = String::from("set $one = 1\nset $label = \"a b\"\n");
            for (i, (entries, width, size, prealloc, reuse, file)) in filesets.iter().enumerate() {
                let prealloc = prealloc.map(|p| format!(",prealloc={p}")).unwrap_or_else(|| ",prealloc".into());
                let reuse = if *reuse { ",reuse,cached" } else { "" };
                if *file {
                    s += &format!("define file name=fs{i},path=/d{i},size={size}{prealloc}{reuse}\n");
                } else {
                    s += &format!(
                        "define fileset name=fs{i},path=/d{i},entries={entries},dirwidth={width},size={size}{prealloc}{reuse}\n"
                    );
                }
            }
            let n = filesets.len();
            for (pi, (instances, threads)) in processes.iter().enumerate() {
                let name = if quoted && pi == 0 { "\"proc 0\"".to_string() } else { format!("p{pi}") };
                s += &format!("define process name={name},instances={instances}\n{{\n");
                for (ti, (tinst, flowops)) in threads.iter().enumerate() {
                    s += &format!("thread name=t{ti},instances={tinst},memsize=1m {{\n");
                    for (fi, (template, io, fd, random)) in flowops.iter().enumerate() {
                        let fs = format!("fs{}", (fi + ti) % n);
                        let random = if *random { ",random" } else { "" };
                        s += &match template {
                            0 => format!("flowop read name=f{fi},filesetname={fs},iosize={io}{random}\n"),
                            1 => format!("flowop write name=f{fi},fd={fd},iosize={io},dsync\n"),
                            2 => format!("flowop createfile name=f{fi},filesetname={fs},fd={fd}\n"),
                            3 => format!("flowop closefile name=f{fi},fd={fd}\n"),
                            4 => format!("flowop readwholefile name=f{fi},fd={fd}\n"),
                            5 => format!("flowop delay name=f{fi},value={io},iters=$one\n"),
                            6 => format!("flowop appendfilerand name=f{fi},filesetname={fs},iosize={io}\n"),
                            7 => format!("flowop sempost name=f{fi},target=f0,value=1\n"),
                            _ => format!("flowop opslimit name=f{fi}\n"),
                        };
                    }
                    s += "}\n";
                }
                s += "}\n";
            }
            if let Some(secs) = run {
                s += &format!("run {secs}\n");
            }
            s
        })
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "[ -~\t\n]{0,400}") {
        let _ = parse_wml(&text, "p.f");
    }

    #[test]
    fn arbitrary_token_soup_never_panics(
        words in prop::collection::vec(
            prop::sample::select(vec![
                "define", "fileset", "file", "process", "thread", "flowop", "read", "name=x", "{", "}", ",", "=",
                "set", "$x", "1", "16k", "run", "psrun", "-5", "\"q\"", "entries=1", "fd=1", "iosize=$x", "path=/a",
                "dirwidth=2", "filesetname=x", "echo", "mode", "quit", "alldone", "cvar", "(", ")", "\n",
            ]),
            0..60,
        )
    ) {
        let text = words.join(" ");
        if let Ok(file) = parse_wml(&text, "p.f") {
            file.workload.check_invariants();
            round_trip(&file.workload);
        }
    }

    #[test]
    fn printing_and_reading_back_gives_the_same_workload(text in valid_wml()) {
        let file = parse_wml(&text, "g.f").unwrap_or_else(|e| panic!("{e}\n{text}"));
        file.workload.check_invariants();
        round_trip(&file.workload);
    }
}

#[test]
fn a_set_after_a_personality_overrides_its_default() {
    // The usual way to run a personality: its text, then the user's settings.
    let text = format!("{}\nset $nthreads = 4\nset $meanfilesize = 1m\n", personality("fileserver").unwrap());
    let w = parse(&text);
    assert_eq!(w.processes[0].threads[0].instances, 4);
    assert_eq!(w.filesets[0].mean_size, 1 << 20);
    assert_eq!(w.variables["nthreads"], Value::Int(4));
}

#[test]
fn duplicate_names_and_lines_after_multiline_strings() {
    let e = error("define process name=p { thread name=t { flowop delay name=d } }\n\ndefine process name=p { thread name=u { flowop delay name=d } }\n");
    assert_eq!(e, "w.f:3: process 'p' is defined twice");
    let e = error(
        "define process name=p {\n thread name=t { flowop delay name=d }\n thread name=t { flowop delay name=d }\n}\n",
    );
    assert_eq!(e, "w.f:3: process 'p': thread 't' is defined twice");
    // A quoted string spanning lines 1-3 moves the line count on: the error is on line 4.
    assert_eq!(error("echo \"one\ntwo\nthree\"\nbogus\n"), "w.f:4: unknown command 'bogus'");
    // The same name in two threads is allowed (Filebench names flowops per thread).
    parse(
        "define process name=p {\n thread name=t { flowop delay name=d }\n thread name=u { flowop delay name=d }\n}\n",
    );
}
