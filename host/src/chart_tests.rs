use super::*;

fn calls(tokens: &[Option<u64>]) -> Vec<Call> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| Call {
            label: i as u64 + 1,
            tokens: *t,
        })
        .collect()
}

fn chart(tokens: &[Option<u64>], markers: Vec<Marker>, points: bool) -> Chart {
    Chart {
        geometry: Geometry::LIVE,
        window: 1000,
        budget: Some(800),
        calls: calls(tokens),
        everything: Vec::new(),
        markers,
        points,
    }
}

#[test]
fn a_failed_call_breaks_the_line_and_is_crossed_on_the_axis() {
    let svg = chart(
        &[Some(100), Some(200), None, Some(300), Some(350)],
        vec![Marker {
            kind: MarkerKind::Failed,
            at: 2,
            title: "call 3 failed".into(),
            href: None,
        }],
        false,
    )
    .render();
    assert_eq!(svg.matches("class=\"tokens\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"failed\"").count(), 1, "{svg}");
    assert!(svg.contains("window 1,000"), "{svg}");
    assert!(svg.contains("prompt budget 800"), "{svg}");
    assert!(
        !svg.contains("class=\"point\""),
        "no points asked for: {svg}"
    );
}

#[test]
fn points_carry_their_tokens_and_markers_their_links_all_escaped() {
    let svg = chart(
        &[Some(1234), Some(900)],
        vec![
            Marker {
                kind: MarkerKind::Compaction,
                at: 1,
                title: "compaction <script>alert(1)</script>".into(),
                href: Some("detail?a=1&b=\"2\"".into()),
            },
            Marker {
                kind: MarkerKind::Cap,
                at: 7,
                title: "capped".into(),
                href: None,
            },
        ],
        true,
    )
    .render();
    assert!(svg.contains("data-t=\"1234\""), "{svg}");
    assert!(svg.contains("<title>call 1: 1,234 tokens</title>"), "{svg}");
    assert!(!svg.contains("<script"), "{svg}");
    assert!(svg.contains("compaction &lt;script&gt;"), "{svg}");
    assert!(
        svg.contains("<a href=\"detail?a=1&amp;b=&quot;2&quot;\"><path class=\"compaction\""),
        "{svg}"
    );
    // A marker past the last call is drawn at the last one, keeping its own index.
    assert!(svg.contains("class=\"cap\""), "{svg}");
    assert!(svg.contains("data-at=\"7\""), "{svg}");
    assert!(!svg.contains("xmlns"), "inline SVG names no URL");
}

#[test]
fn the_standalone_form_declares_its_namespace_and_each_kind_has_its_own_shape() {
    let kinds = [
        MarkerKind::Compaction,
        MarkerKind::Cap,
        MarkerKind::Prune,
        MarkerKind::Flush,
        MarkerKind::Failed,
    ];
    let markers = kinds
        .iter()
        .map(|k| Marker {
            kind: *k,
            at: 0,
            title: k.class().into(),
            href: None,
        })
        .collect();
    let svg = chart(&[Some(10)], markers, true).render_standalone();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let shape = |class: &str| -> String {
        let rest = svg
            .split(&format!("<path class=\"{class}\" d=\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no {class}: {svg}"));
        let d = rest.split('"').next().unwrap();
        d.chars().filter(|c| c.is_alphabetic()).collect()
    };
    let forms: Vec<String> = kinds.iter().map(|k| shape(k.class())).collect();
    for (i, a) in forms.iter().enumerate() {
        for b in &forms[i + 1..] {
            assert_ne!(a, b, "{forms:?}");
        }
    }
}

#[test]
fn an_empty_chart_still_draws_its_window() {
    let svg = chart(&[], Vec::new(), true).render();
    assert!(svg.contains("window 1,000"));
    assert!(svg.contains("data-calls=\"0\""));
}
