//! The built-in `legacy` engine as a loadable library, to show that the engine the host links in
//! crosses the ABI like any third-party one. The host still refuses to register a *plugin* under
//! the id `legacy`; load this library with `rampart engines check`.

rampart_engine_api::export_engine!(rampart_legacy::LegacyEngine);
