//! Where the PERMANOVA kernels spend their time, without Python (run: cargo run --release --example permanova_kernels).
//!
//! n = 2000 points in 24 dimensions, 3 groups, 1024 permutations: times the label packing, every kernel of
//! the quantized screen this CPU runs, the exact f64 kernel, and the factored screen's two kernels (its
//! residual pass and its per-permutation group sums), on one thread and on all, with pair-updates per second
//! where it applies. Times are CPU seconds of the whole process (all threads, CLOCK_PROCESS_CPUTIME_ID) where
//! Linux gives them, else wall seconds: on a shared machine the CPU time is what the kernel itself cost.
use stats_core_native::factored::{between_sums, residual_max};
use stats_core_native::matrix::Distances;
use stats_core_native::permanova::{pack, within_sums};
use stats_core_native::permute::permutations;
use stats_core_native::screen::{quantized_within_sums_by, Kernel, QUANTUM_MAX};
use std::time::Instant;

/// CPU seconds this process (every thread, exited ones included) has run so far, where Linux says.
fn cpu_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            tv_sec: i64,
            tv_nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, out: *mut Timespec) -> i32;
        }
        const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
        let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec to a valid pointer.
        if unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut t) } == 0 {
            return Some(t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9);
        }
    }
    None
}

fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let (cpu, t) = (cpu_seconds(), Instant::now());
            f();
            match (cpu, cpu_seconds()) {
                (Some(a), Some(b)) => b - a,
                _ => t.elapsed().as_secs_f64(),
            }
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let (n, k, perms, g) = (2000usize, 24usize, 1024usize, 3usize);
    let mut state = 1u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut y: Vec<f64> = (0..n * k).map(|_| next() - 0.5).collect();
    for t in 0..k {
        let mean = (0..n).map(|i| y[i * k + t]).sum::<f64>() / n as f64;
        (0..n).for_each(|i| y[i * k + t] -= mean);
    }
    let cond: Vec<f64> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| (0..k).map(|t| (y[i * k + t] - y[j * k + t]).powi(2)).sum::<f64>().sqrt())
        .collect();
    let d = Distances::new(&cond, n, false).unwrap();
    let codes: Vec<i32> = (0..n).map(|j| (j % g) as i32).collect();
    let labels = permutations(&codes, 1, 0, perms);
    let inv = vec![1.0 / (n / g) as f64; g];
    let scale = QUANTUM_MAX / cond.iter().map(|v| v * v).fold(0.0, f64::max);
    let mut means = vec![0.0f64; n];
    for i in 0..n {
        means[i] = (0..n)
            .filter(|&j| j != i)
            .map(|j| (0..k).map(|t| (y[i * k + t] - y[j * k + t]).powi(2)).sum::<f64>())
            .sum::<f64>()
            / n as f64;
    }
    let grand = means.iter().sum::<f64>() / n as f64;
    let updates = (n * (n - 1) / 2 * perms) as f64;
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let t = best_of(5, || drop(std::hint::black_box(pack::<u32>(&labels, perms, n))));
            println!("{threads} thread(s): pack u32 labels                {:7.2} ms", t * 1e3);
            for kernel in [Kernel::Words, Kernel::BytePlanes, Kernel::Vnni] {
                let t = best_of(5, || {
                    drop(std::hint::black_box(quantized_within_sums_by(kernel, d, &labels, perms, &inv, scale)))
                });
                println!(
                    "{threads} thread(s): quantized screen, {:<11} {:7.2} ms  {:6.1} G pair-updates/s",
                    format!("{kernel:?}"),
                    t * 1e3,
                    updates / t / 1e9
                );
            }
            let t = best_of(2, || drop(std::hint::black_box(within_sums(d, &labels, perms, &inv))));
            println!(
                "{threads} thread(s): exact f64 within sums          {:7.2} ms  {:6.1} G pair-updates/s",
                t * 1e3,
                updates / t / 1e9
            );
            let t = best_of(5, || {
                std::hint::black_box(residual_max(d, &y, k, &means, grand));
            });
            println!("{threads} thread(s): factor residual (k = {k})        {:7.2} ms", t * 1e3);
            let t = best_of(5, || drop(std::hint::black_box(between_sums(&y, k, &labels, perms, &inv))));
            println!(
                "{threads} thread(s): factored group sums            {:7.2} ms  {:6.1} G pair-updates/s (equivalent)",
                t * 1e3,
                updates / t / 1e9
            );
        });
    }
    println!("residual max {:.2e}", residual_max(d, &y, k, &means, grand));
}
