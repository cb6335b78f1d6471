use super::*;

#[test]
fn host_names_lose_their_port_and_case() {
    assert_eq!(host_name("127.0.0.1:8787"), "127.0.0.1");
    assert_eq!(host_name("[::1]:8787"), "::1");
    assert_eq!(host_name("LocalHost"), "localhost");
    assert_eq!(host_name("attacker.example:8787"), "attacker.example");
    assert_eq!(host_name("attacker.example."), "attacker.example");
}

#[test]
fn only_this_servers_names_are_hosts() {
    let loopback: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
    assert!(host_allowed("127.0.0.1", loopback, &[]));
    assert!(host_allowed("::1", loopback, &[]));
    assert!(host_allowed("localhost", loopback, &[]));
    assert!(!host_allowed("attacker.example", loopback, &[]));
    assert!(!host_allowed("10.0.0.5", loopback, &[]));
    // The bound address, and any literal address when bound to all interfaces.
    assert!(host_allowed(
        "10.0.0.5",
        Some("10.0.0.5".parse().unwrap()),
        &[]
    ));
    assert!(host_allowed(
        "10.0.0.5",
        Some("0.0.0.0".parse().unwrap()),
        &[]
    ));
    assert!(!host_allowed(
        "attacker.example",
        Some("0.0.0.0".parse().unwrap()),
        &[]
    ));
    // Configured names.
    let allowed = vec!["rampart.internal".to_owned()];
    assert!(host_allowed("rampart.internal", loopback, &allowed));
    assert!(host_allowed("anything", loopback, &["*".to_owned()]));
}

#[test]
fn origins_are_refused_unless_listed() {
    assert!(!origin_allowed("http://attacker.example:8787", &[]));
    assert!(!origin_allowed("null", &[]));
    let allowed = vec!["http://localhost:3000".to_owned()];
    assert!(origin_allowed("http://LOCALHOST:3000", &allowed));
    assert!(!origin_allowed("http://localhost:3001", &allowed));
    assert!(origin_allowed("https://x", &["*".to_owned()]));
}

#[test]
fn json_content_types() {
    let with = |v: &str| {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, v.parse().unwrap());
        is_json(&h)
    };
    assert!(with("application/json"));
    assert!(with("Application/JSON; charset=utf-8"));
    assert!(with("application/vnd.api+json"));
    assert!(!with("text/plain"));
    assert!(!with("application/x-www-form-urlencoded"));
    assert!(!is_json(&HeaderMap::new()));
}

#[test]
fn errors_follow_the_route() {
    let none = HeaderMap::new();
    assert_eq!(wire_for("/v1/messages", &none), Wire::Anthropic);
    assert_eq!(
        wire_for("/v1/messages/count_tokens", &none),
        Wire::Anthropic
    );
    assert_eq!(wire_for("/v1/chat/completions", &none), Wire::OpenAi);
    assert_eq!(wire_for("/v1/responses", &none), Wire::Responses);
    assert_eq!(wire_for("/nope", &none), Wire::OpenAi);
    let mut anthropic = HeaderMap::new();
    anthropic.insert("anthropic-version", "2023-06-01".parse().unwrap());
    assert_eq!(wire_for("/nope", &anthropic), Wire::Anthropic);
}

#[test]
fn the_token_is_found_in_any_of_its_headers() {
    for (name, value) in [
        ("x-rampart-token", "t0k"),
        ("authorization", "Bearer t0k"),
        ("x-api-key", "t0k"),
    ] {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        assert!(carries_token(&h, "t0k"), "{name}");
        assert!(!carries_token(&h, "other"), "{name}");
    }
    assert!(!carries_token(&HeaderMap::new(), "t0k"));
}
