//! One request at a time to an upstream that answers at once, from one thread, as a turn of
//! `rampart serve` makes its upstream call: `reqwest::blocking` (what serve uses: a client
//! whose requests run on a runtime thread of its own, handed over by channels), reqwest's async
//! client driven on the calling thread by a current-thread runtime of its own, and `ureq` (the
//! request written and the answer read on the calling thread). Variants interleaved
//! round by round; the median wall time, and the process's CPU time (all threads) per request
//! (the mean: the kernel's accounting of one short request is coarse).

use std::io::Read;
use std::time::{Duration, Instant};

/// The process's CPU time so far, every thread's, user and system.
fn cpu_now() -> Duration {
    // SAFETY: an all-zero `rusage` is valid, and getrusage fills it for RUSAGE_SELF.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("the upstream URL");
    let bodies: Vec<(String, Vec<u8>)> = args
        .map(|path| (path.clone(), std::fs::read(&path).expect("a body")))
        .collect();
    let blocking = reqwest::blocking::Client::builder()
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let asynchronous = {
        let _in = local.enter();
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    for (name, raw) in &bodies {
        let rounds = if raw.len() > 100_000 { 40 } else { 400 };
        let (mut rq_wall, mut rq_cpu, mut ur_wall, mut ur_cpu) = (vec![], vec![], vec![], vec![]);
        let (mut as_wall, mut as_cpu) = (vec![], vec![]);
        for round in 0..rounds + 20 {
            // reqwest::blocking, as serve's providers call it.
            let (t, c) = (Instant::now(), cpu_now());
            let mut answer = blocking
                .post(&url)
                .header("content-type", "application/json")
                .body(raw.clone())
                .send()
                .unwrap();
            let mut text = String::new();
            answer.read_to_string(&mut text).unwrap();
            assert!(text.contains("Done."));
            if round >= 20 {
                rq_wall.push(t.elapsed().as_secs_f64() * 1e3);
                rq_cpu.push((cpu_now() - c).as_secs_f64() * 1e3);
            }
            // reqwest's async client, on this thread.
            let (t, c) = (Instant::now(), cpu_now());
            let text = local.block_on(async {
                let answer = tokio::time::timeout(
                    Duration::from_secs(60),
                    asynchronous
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(raw.clone())
                        .send(),
                )
                .await
                .unwrap()
                .unwrap();
                let mut answer = answer;
                let mut text = Vec::new();
                while let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), answer.chunk())
                    .await
                    .unwrap()
                    .unwrap()
                {
                    text.extend_from_slice(&chunk);
                }
                String::from_utf8(text).unwrap()
            });
            assert!(text.contains("Done."));
            if round >= 20 {
                as_wall.push(t.elapsed().as_secs_f64() * 1e3);
                as_cpu.push((cpu_now() - c).as_secs_f64() * 1e3);
            }
            // ureq, on this thread.
            let (t, c) = (Instant::now(), cpu_now());
            let mut answer = agent
                .post(&url)
                .header("content-type", "application/json")
                .send(&raw[..])
                .unwrap();
            let text = answer.body_mut().read_to_string().unwrap();
            assert!(text.contains("Done."));
            if round >= 20 {
                ur_wall.push(t.elapsed().as_secs_f64() * 1e3);
                ur_cpu.push((cpu_now() - c).as_secs_f64() * 1e3);
            }
        }
        let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
        println!(
            "{name} ({} bytes, {rounds} requests each): reqwest::blocking wall {:.3} ms, cpu {:.3} ms; reqwest on this thread wall {:.3} ms, cpu {:.3} ms; ureq wall {:.3} ms, cpu {:.3} ms",
            raw.len(),
            median(rq_wall.clone()),
            mean(&rq_cpu),
            median(as_wall.clone()),
            mean(&as_cpu),
            median(ur_wall.clone()),
            mean(&ur_cpu)
        );
    }
}
