//! The typed ABI surface is frozen for the whole 1.x line (abi_stable accepts a library only
//! when it has at least the fields the host expects, so growing anything here would stop every
//! older engine from loading in a newer host). This test pins the layout: if it fails, the
//! change breaks compatibility and belongs in API 2.0, not in a 1.x release.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_stable::StableAbi;
use rampart_engine_api::ffi::{EngineModule_Ref, FfiCallCtxRef, FfiEngineBox, FfiHostBox};

/// Every type reachable from `layout` with its size, fields and function signatures. Source
/// lines and addresses are left out, so only real layout changes show.
fn walk(
    layout: &'static abi_stable::type_layout::TypeLayout,
    seen: &mut std::collections::BTreeSet<String>,
    out: &mut String,
) {
    let name = layout.full_type().to_string();
    if !seen.insert(name.clone()) {
        return;
    }
    out.push_str(&format!(
        "{name} size={} align={}\n",
        layout.size(),
        layout.alignment()
    ));
    let mut children = Vec::new();
    for fields in [layout.get_fields(), Some(layout.phantom_fields())]
        .into_iter()
        .flatten()
    {
        for field in fields.iter() {
            out.push_str(&format!("  .{}: {}\n", field.name(), field.full_type()));
            for function in field.function_range().iter() {
                out.push_str(&format!("    fn {function}\n"));
            }
            children.push(field.layout());
        }
    }
    for child in children {
        walk(child, seen, out);
    }
}

fn describe() -> String {
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, layout) in [
        ("EngineModule_Ref", <EngineModule_Ref as StableAbi>::LAYOUT),
        ("FfiEngineBox", <FfiEngineBox as StableAbi>::LAYOUT),
        ("FfiHostBox", <FfiHostBox as StableAbi>::LAYOUT),
        (
            "FfiCallCtxRef",
            <FfiCallCtxRef<'static> as StableAbi>::LAYOUT,
        ),
    ] {
        out.push_str(&format!("== {name}\n"));
        walk(layout, &mut seen, &mut out);
    }
    out
}

#[test]
fn the_1x_abi_surface_is_unchanged() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frozen_abi.snapshot");
    let now = describe();
    if std::env::var_os("RAMPART_BLESS_ABI").is_some() {
        std::fs::write(&path, &now).unwrap();
    }
    let pinned = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing; create it with RAMPART_BLESS_ABI=1 cargo test",
            path.display()
        )
    });
    assert!(
        pinned == now,
        "the frozen 1.x ABI surface changed. Engines built against 1.0 would stop loading. \
         Move the change to named JSON calls, or to API 2.0. (Diff {} against the new layout.)",
        path.display()
    );
}
