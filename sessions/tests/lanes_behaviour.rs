//! Lanes: per-key serialisation, the global limit, re-entry and panic safety.
//!
//! No test asserts on timing. Ordering is made deterministic by waiting (polling) until the
//! lanes report the expected number of waiters before the next thread arrives; every test
//! that could deadlock runs under a watchdog that fails it instead of hanging CI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use rampart_sessions::lanes::{LaneStage, Lanes};

const WATCHDOG: Duration = Duration::from_secs(10);

/// Runs `body` on its own thread and fails the test if it has not finished in time (a
/// deadlock), re-raising any panic of the body.
fn with_watchdog(body: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        body();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(WATCHDOG) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: surface its panic.
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: not finished after {WATCHDOG:?}"),
    }
}

/// Polls until `condition` holds (the watchdog bounds the wait).
fn wait_until(condition: impl Fn() -> bool) {
    while !condition() {
        thread::sleep(Duration::from_millis(1));
    }
}

/// Tracks how many jobs are inside a section at once, and the most ever seen.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

#[test]
fn same_key_jobs_never_overlap_and_run_in_arrival_order() {
    with_watchdog(|| {
        let lanes = Lanes::new(8);
        let order = Arc::new(Mutex::new(Vec::new()));
        let gauge = Arc::new(Gauge::default());
        let (release_tx, release_rx) = mpsc::channel::<()>();

        // Job 0 holds the lane until released, so the others queue up behind it.
        let first = {
            let (lanes, order, gauge) = (lanes.clone(), order.clone(), gauge.clone());
            thread::spawn(move || {
                lanes.run("session", || {
                    gauge.enter();
                    order.lock().unwrap().push(0);
                    release_rx.recv().unwrap();
                    gauge.leave();
                })
            })
        };
        wait_until(|| lanes.running() == 1);

        let mut handles = vec![first];
        for i in 1..=8 {
            let (lanes2, order, gauge) = (lanes.clone(), order.clone(), gauge.clone());
            // Mixed case: the same lane.
            let key = if i % 2 == 0 { "SESSION" } else { "session" };
            handles.push(thread::spawn(move || {
                lanes2.run(key, || {
                    gauge.enter();
                    order.lock().unwrap().push(i);
                    thread::yield_now();
                    gauge.leave();
                })
            }));
            // Arrival order is fixed: the next thread starts only once this one queued.
            wait_until(|| lanes.waiting() == i);
        }
        release_tx.send(()).unwrap();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..=8).collect::<Vec<_>>());
        assert_eq!(gauge.max(), 1);
        assert_eq!((lanes.running(), lanes.waiting()), (0, 0));
    });
}

#[test]
fn different_keys_run_concurrently_up_to_the_limit_and_never_beyond() {
    with_watchdog(|| {
        let lanes = Lanes::new(3);
        // Three jobs on three keys can only pass this barrier if they run at the same time.
        let barrier = Arc::new(Barrier::new(3));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let mut handles = Vec::new();
        for key in ["a", "b", "c"] {
            let (lanes, barrier, release_rx) = (lanes.clone(), barrier.clone(), release_rx.clone());
            handles.push(thread::spawn(move || {
                lanes.run(key, || {
                    barrier.wait();
                    release_rx.lock().unwrap().recv().unwrap();
                })
            }));
        }
        wait_until(|| lanes.running() == 3);

        // A fourth key must wait for a permit, not run.
        let fourth_ran = Arc::new(AtomicBool::new(false));
        {
            let (lanes, fourth_ran) = (lanes.clone(), fourth_ran.clone());
            handles.push(thread::spawn(move || {
                lanes.run("d", || fourth_ran.store(true, Ordering::SeqCst))
            }));
        }
        wait_until(|| lanes.waiting() == 1);
        assert!(!fourth_ran.load(Ordering::SeqCst));
        assert_eq!(lanes.running(), 3);

        for _ in 0..3 {
            release_tx.send(()).unwrap();
        }
        for handle in handles {
            handle.join().unwrap();
        }
        assert!(fourth_ran.load(Ordering::SeqCst));
    });
}

#[test]
fn many_jobs_respect_both_bounds() {
    with_watchdog(|| {
        const LIMIT: usize = 3;
        let lanes = Lanes::new(LIMIT);
        let global = Arc::new(Gauge::default());
        let per_key: Arc<Vec<Gauge>> = Arc::new((0..5).map(|_| Gauge::default()).collect());
        let done = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..10)
            .map(|t| {
                let (lanes, global, per_key, done) =
                    (lanes.clone(), global.clone(), per_key.clone(), done.clone());
                thread::spawn(move || {
                    for j in 0..30 {
                        let k = (t * 7 + j * 3) % 5;
                        lanes.run(&format!("key-{k}"), || {
                            global.enter();
                            per_key[k].enter();
                            thread::yield_now();
                            per_key[k].leave();
                            global.leave();
                        });
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 300);
        assert!(global.max() <= LIMIT, "max concurrency {}", global.max());
        for gauge in per_key.iter() {
            assert_eq!(gauge.max(), 1);
        }
    });
}

#[test]
fn reentrant_same_key_runs_directly() {
    with_watchdog(|| {
        let lanes = Lanes::new(1);
        let value = lanes.run("k", || {
            assert!(lanes.holds("K"));
            // The overflow path: compaction from inside the turn's lane.
            lanes.run("K", || lanes.run("k", || 42))
        });
        assert_eq!(value, 42);
        assert!(!lanes.holds("k"));
        assert_eq!(lanes.running(), 0);
        // try_run never waits on a lane the thread holds.
        let value = lanes.run("k", || lanes.try_run("k", Duration::ZERO, || 7).unwrap());
        assert_eq!(value, 7);
    });
}

#[test]
fn nested_different_key_borrows_the_outer_permit() {
    with_watchdog(|| {
        let lanes = Lanes::new(1);
        let value = lanes.run("parent", || {
            assert_eq!(lanes.running(), 1);
            let inner = lanes.run("child", || {
                assert_eq!(lanes.running(), 1, "no second permit");
                assert!(lanes.holds("parent") && lanes.holds("child"));
                1
            });
            inner + 1
        });
        assert_eq!(value, 2);
        assert_eq!(lanes.running(), 0);
    });
}

#[test]
fn nested_work_passes_a_waiter_stuck_on_the_permit_it_holds() {
    with_watchdog(|| {
        // Limit 1: this thread holds `x` and the only permit. Another thread queues for `y`
        // and waits for that permit. If our nested entry into `y` queued behind it, each
        // would wait for the other.
        let lanes = Lanes::new(1);
        let other_ran = Arc::new(AtomicBool::new(false));
        let other = lanes.run("x", || {
            let other = {
                let (lanes, other_ran) = (lanes.clone(), other_ran.clone());
                thread::spawn(move || lanes.run("y", || other_ran.store(true, Ordering::SeqCst)))
            };
            wait_until(|| lanes.waiting() == 1);
            lanes.run("y", || assert!(!other_ran.load(Ordering::SeqCst)));
            // The other thread still needs our permit; it runs after we leave `x`.
            other
        });
        other.join().unwrap();
        assert!(other_ran.load(Ordering::SeqCst));
    });
}

#[test]
fn guard_lends_the_lane_to_another_thread() {
    with_watchdog(|| {
        let lanes = Lanes::new(1);
        let value = lanes.run_with_guard("Sess", |guard| {
            assert_eq!(guard.key(), "sess");
            // E.g. a compaction moved to a worker thread so the turn can enforce a timeout.
            thread::scope(|scope| {
                scope
                    .spawn(|| {
                        assert!(!lanes.holds("sess"));
                        guard.run_direct(|| {
                            assert!(lanes.holds("sess"));
                            lanes.run("sess", || lanes.run("other", || 5))
                        })
                    })
                    .join()
                    .unwrap()
            })
        });
        assert_eq!(value, 5);
        assert_eq!((lanes.running(), lanes.waiting()), (0, 0));
    });
}

#[test]
fn panicking_job_releases_its_lane_and_permit() {
    with_watchdog(|| {
        let lanes = Lanes::new(1);
        let result = catch_unwind(AssertUnwindSafe(|| {
            lanes.run("k", || lanes.run("k", || panic!("job failed")))
        }));
        let panic = result.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"job failed"));
        assert!(!lanes.holds("k"));
        assert_eq!(lanes.running(), 0);
        // The lane and the only permit are free again, for this and other threads.
        assert_eq!(lanes.run("k", || 1), 1);
        let other = lanes.clone();
        assert_eq!(
            thread::spawn(move || other.run("k", || 2)).join().unwrap(),
            2
        );
        assert_eq!(lanes.run("j", || 3), 3);
    });
}

#[test]
fn try_run_times_out_naming_the_key_and_the_wait() {
    with_watchdog(|| {
        let lanes = Lanes::new(1);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let lanes = lanes.clone();
            thread::spawn(move || lanes.run("busy", || release_rx.recv().unwrap()))
        };
        wait_until(|| lanes.running() == 1);

        let timeout = Duration::from_millis(20);
        let err = lanes
            .try_run("Busy", timeout, || unreachable!())
            .unwrap_err();
        assert_eq!(err.key, "busy");
        assert_eq!(err.stage, LaneStage::SessionLane);
        assert!(err.waited >= timeout);
        let message = err.to_string();
        assert!(
            message.contains("`busy`") && message.contains("retry"),
            "{message}"
        );

        let err = lanes
            .try_run("free", timeout, || unreachable!())
            .unwrap_err();
        assert_eq!(err.stage, LaneStage::GlobalLimit);
        assert!(err.to_string().contains("global limit"));
        // Giving up leaves no trace in the queues.
        assert_eq!(lanes.waiting(), 0);

        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(lanes.try_run("busy", timeout, || 9).unwrap(), 9);
    });
}

#[test]
fn zero_limit_is_raised_to_one() {
    with_watchdog(|| {
        let lanes = Lanes::new(0);
        assert_eq!(lanes.global_limit(), 1);
        assert_eq!(lanes.run("k", || 1), 1);
    });
}
