//! `flashmux profile gc-contribution`: paper E's profiling of GC contribution against write
//! randomness on a drive, and the fit of hWA-BC's `G = a·ln(R) + b`.

use anyhow::Context;
use flashmux::experiment::gc_profile::{profile_gc_contribution, ProfileError, ProfileParams};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    what: Profile,
}

#[derive(clap::Subcommand)]
enum Profile {
    /// Two tenants write randomly in small (4, 8, 16 KiB) and large (64 KiB) blocks on the
    /// drive, aged to 80%; fits G = a·ln(R) + b to each one's share of the pages GC moved.
    GcContribution(GcArgs),
}

#[derive(clap::Args)]
struct GcArgs {
    /// Device preset.
    #[arg(long, default_value = "cosmos")]
    device: String,
    /// Logical capacity of the drive.
    #[arg(long, default_value = "16GiB")]
    capacity: String,
    /// Simulated time of each pair's run.
    #[arg(long, default_value = "30s")]
    time: String,
    /// Small block sizes, KiB.
    #[arg(long, value_delimiter = ',', default_values_t = [4u64, 8, 16])]
    sizes: Vec<u64>,
    /// The large block size they run against, KiB.
    #[arg(long, default_value_t = 64)]
    against: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    let Profile::GcContribution(a) = args.what;
    let p = ProfileParams {
        preset: a.device,
        capacity: a.capacity,
        time: a.time,
        sizes_kib: a.sizes,
        against_kib: a.against,
        seed: a.seed,
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("installing the Ctrl-C handler")?;
    }
    println!("GC contribution profile: {} ({}), {} per pair, random writes at QD 16, aged to 80%", p.preset, p.capacity, p.time);
    println!("{:>10} {:>10} {:>8} {:>8} {:>12} {:>12} {:>8} {:>8}", "small KiB", "large KiB", "R small", "R large", "moved small", "moved large", "share", "fitted");
    let mut rows = Vec::new();
    let res = profile_gc_contribution(&p, &|| interrupted.load(Ordering::SeqCst), &mut |q| {
        println!(
            "{:>10} {:>10} {:>8.3} {:>8.3} {:>12} {:>12} {:>7.1}% {:>8}",
            q.kib.0, q.kib.1, q.randomness.0, q.randomness.1, q.moved.0, q.moved.1, q.share.0 * 100.0, "-"
        );
        rows.push(q.clone());
    });
    let prof = match res {
        Ok(prof) => prof,
        Err(ProfileError::Interrupted) => {
            eprintln!("flashmux: interrupted; {} of {} pairs profiled, no fit", rows.len(), p.sizes_kib.len());
            return Ok(ExitCode::from(130));
        }
        Err(e @ (ProfileError::Config(_) | ProfileError::Invalid(_) | ProfileError::Sim(_))) => {
            return Err(anyhow::Error::new(crate::BadArg(e.to_string())));
        }
    };
    println!();
    println!("fit: G = a·ln(R) + b with a = {:.4}, b = {:.4} (b/a = {:.2})", prof.a, prof.b, prof.b / prof.a);
    for q in &prof.pairs {
        println!(
            "  {} KiB vs {} KiB: measured share {:.1}%, fitted {:.1}%",
            q.kib.0,
            q.kib.1,
            q.share.0 * 100.0,
            prof.predicted_share(q.randomness.0) * 100.0
        );
    }
    println!("use: [host.hwabc] a = {:.4}, b = {:.4}", prof.a, prof.b);
    Ok(ExitCode::SUCCESS)
}
