//! `GET /ui` in a real browser: Debian's headless Chromium reads the live page of a
//! `rampart serve` while conversations run through it against the loopback model, and its
//! DOM shows the conversation appear, its chart grow and a compaction with its tokens before
//! and after; the compaction's page shows the summary it wrote and what it removed, and a capped
//! result's link opens its original; screenshots of the page and of the compaction's are saved
//! under `target/ui-browser/`. A second test has the page's script hear a call on `/ui/events`,
//! add its row and swap in the chart the server draws, without a reload.
//!
//! Without Chromium the test prints a `SKIPPED:` line and passes, unless
//! `RAMPART_REQUIRE_BROWSER=1` (as `.ci/run` sets) makes a missing browser a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::loopback::{Loopback, openai_overflow_error, openai_text_stream};
use common::serve::ServeProcess;
use serde_json::{Value, json};

/// Chromium, from `RAMPART_CHROMIUM` or `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RAMPART_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

/// Headless Chromium with a fresh profile and no background traffic (the test machine's
/// network refuses it), run once on `url`; `modes` holds `--dump-dom` or `--screenshot=FILE`,
/// and any further flag.
fn browse(browser: &Path, profile: &Path, modes: &[&str], url: &str) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1100,1500",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(modes)
        .arg(url)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed on {url}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn config(url: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[agents.defaults.compaction]
model = "sim/default"

[models.providers.up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 32000
"#
    )
}

#[test]
fn the_live_page_shows_a_conversation_grow_and_compact_in_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("RAMPART_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "RAMPART_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)"
        );
        println!(
            "SKIPPED: no chromium on PATH (apt-get install chromium, or set RAMPART_CHROMIUM)"
        );
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let up = Loopback::start();
    let serve = ServeProcess::start(&config(&up.url()));
    let page = format!("{}/ui", serve.base);
    let dom = browse(&browser, profile.path(), &["--dump-dom"], &page);
    assert!(dom.contains("<h1>Rampart serve</h1>"), "{dom}");
    assert!(
        dom.contains("Live: updated as they happen."),
        "the page's script ran under its Content-Security-Policy and subscribed: {dom}"
    );
    assert_eq!(dom.matches("class=\"conversation\"").count(), 0, "{dom}");

    // Two turns: the conversation appears with two points.
    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    let turn = |history: &mut Vec<Value>, n: usize| {
        up.push(openai_text_stream(
            &format!("Noted part {n}."),
            2000 + 1500 * n as u64,
            4,
        ));
        history.push(json!({"role": "user",
            "content": format!("Part {n}: {}", "lorem ipsum dolor sit amet ".repeat(220))}));
        let v = serve.chat(history);
        history.push(v["choices"][0]["message"].clone());
    };
    turn(&mut history, 0);
    turn(&mut history, 1);
    let dom = browse(&browser, profile.path(), &["--dump-dom"], &page);
    assert_eq!(dom.matches("class=\"conversation\"").count(), 1, "{dom}");
    let first = dom.matches("class=\"point\"").count();
    assert_eq!(first, 2, "{dom}");

    // More turns, then an overflow the server recovers from by compacting: the chart grows
    // and carries a compaction marker, listed with its tokens before and after.
    for n in 2..5 {
        turn(&mut history, n);
    }
    up.push(openai_overflow_error(32_000, 40_000));
    up.push(openai_text_stream("All parts summarised.", 3000, 5));
    history.push(json!({"role": "user", "content": "Summarise all parts."}));
    serve.chat(&history);
    let dom = browse(&browser, profile.path(), &["--dump-dom"], &page);
    assert_eq!(dom.matches("class=\"conversation\"").count(), 1, "{dom}");
    assert_eq!(dom.matches("class=\"point\"").count(), 6, "{dom}");
    assert!(
        dom.contains("<td class=\"n\">6</td><td class=\"n\">6</td>"),
        "six turns, six answered calls: {dom}"
    );
    assert_eq!(dom.matches("class=\"compaction\"").count(), 1, "{dom}");
    let row = dom
        .split("<tr id=\"s-")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .expect("the compaction's row");
    let anchor = format!("s-{}", row.split('"').next().unwrap());
    assert!(anchor.ends_with("-c0"), "{anchor}");
    let numbers: Vec<u64> = row
        .split("<td class=\"n\">")
        .skip(2)
        .filter_map(|cell| cell.split('<').next()?.replace(',', "").parse().ok())
        .collect();
    assert!(
        numbers.len() >= 2 && numbers[0] > numbers[1],
        "tokens before and after: {row}"
    );

    // Following the marker's link: the screenshot shows the compaction's row.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ui-browser");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("ui.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &browser,
        profile.path(),
        &[&format!("--screenshot={}", shot.display())],
        &format!("{page}#{anchor}"),
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "no PNG at {}", shot.display());
    println!(
        "screenshot of /ui: {}",
        shot.canonicalize().unwrap().display()
    );

    // Clicking the compaction (its marker and its row link to the same page): what it
    // removed, the summary it wrote, the tokens before and after, read from the session.
    let detail = dom
        .split("<a class=\"detail\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the compaction's detail link")
        .to_owned();
    assert!(
        dom.contains(&format!("<a href=\"{detail}\"><path class=\"compaction\"")),
        "the chart's marker links to the detail page: {dom}"
    );
    let page_of_compaction = browse(
        &browser,
        profile.path(),
        &["--dump-dom"],
        &format!("{}/{detail}", serve.base),
    );
    let summary = page_of_compaction
        .split("<pre id=\"summary\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("no summary: {page_of_compaction}"));
    assert!(summary.contains("Part"), "the summary it wrote: {summary}");
    assert!(
        page_of_compaction.contains("<td>user</td><td>Part 0: lorem ipsum"),
        "what it removed: {page_of_compaction}"
    );
    assert!(page_of_compaction.contains("id=\"tokens-before\""));
    let shot = shots.join("compaction.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &browser,
        profile.path(),
        &[&format!("--screenshot={}", shot.display())],
        &format!("{}/{detail}", serve.base),
    );
    assert!(std::fs::read(&shot).unwrap().starts_with(b"\x89PNG"));

    // A capped tool result: its link on the page opens the whole original.
    let original = format!(
        "{}MIDDLE-MARKER-4127{}",
        "head of the build log\n".repeat(1_400),
        "tail of the build log\n".repeat(1_400)
    );
    up.push(openai_text_stream("The build failed.", 14_000, 4));
    serve.chat(&[
        json!({"role": "user", "content": "Why did the build fail?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
            "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": original}),
    ]);
    let dom = browse(&browser, profile.path(), &["--dump-dom"], &page);
    let blob = dom
        .split("<a class=\"blob\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no blob link: {dom}"))
        .to_owned();
    assert!(blob.starts_with("ui/blobs/sha256:"), "{blob}");
    let text = browse(
        &browser,
        profile.path(),
        &["--dump-dom"],
        &format!("{}/{blob}", serve.base),
    );
    assert!(
        text.contains("MIDDLE-MARKER-4127") && text.contains("tail of the build log"),
        "the original, whole, as text: {}",
        &text[..text.len().min(600)]
    );
}

/// The requests to `endpoint` `/metrics` has counted (`ui_events`: the page's script has
/// subscribed; `ui_chart`: it fetched a chart).
fn requests(base: &str, endpoint: &str) -> u64 {
    let text = reqwest::blocking::get(format!("{base}/metrics"))
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .filter(|l| l.contains(&format!("endpoint=\"{endpoint}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn the_pages_script_adds_a_call_it_hears_without_a_reload_in_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("RAMPART_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "RAMPART_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)"
        );
        println!("SKIPPED: no chromium on PATH");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let up = Loopback::start();
    let mut serve = ServeProcess::start(&config(&up.url()));
    let page = format!("{}/ui", serve.base);
    // The page is read once, with no conversation; its script subscribes, and the DOM is
    // dumped once the stream has ended (virtual time waits for the open stream).
    let reader = {
        let (browser, profile, page) = (browser.clone(), profile.path().to_owned(), page.clone());
        std::thread::spawn(move || {
            browse(
                &browser,
                &profile,
                &["--dump-dom", "--virtual-time-budget=3000"],
                &page,
            )
        })
    };
    let mut waits = 0;
    while requests(&serve.base, "ui_events") == 0 {
        waits += 1;
        assert!(
            waits < 1200,
            "the page's script never subscribed to /ui/events"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    up.push(openai_text_stream("Noted.", 4321, 3));
    serve.chat(&[json!({"role": "user", "content": "Hello"})]);
    // The script fetches the chart the server draws; the server stops once it has asked.
    let mut waits = 0;
    while requests(&serve.base, "ui_chart") == 0 {
        waits += 1;
        assert!(waits < 1200, "the page's script never fetched the chart");
        std::thread::sleep(Duration::from_millis(50));
    }
    serve.terminate();
    let _ = serve.wait();
    let dom = reader.join().unwrap();
    assert_eq!(
        dom.matches("class=\"conversation\"").count(),
        1,
        "the script added the conversation's row: {dom}"
    );
    assert_eq!(dom.matches("class=\"point\"").count(), 1, "{dom}");
    assert!(dom.contains("data-t=\"4321\""), "{dom}");
    assert!(dom.contains("call 1: 4,321 tokens"), "{dom}");
}
