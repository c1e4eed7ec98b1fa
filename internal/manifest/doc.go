// Package manifest reads the experiment manifests users write (and the older
// tasks files of the flag form) into API messages, strictly.
//
// Strict because a typo must not silently change what runs on a TPU slice for
// hours: `replicas: 4` instead of `replica: 4` would otherwise start one host.
// Every unknown key, wrong type and malformed line is reported with its full
// field path (role_to_task_spec.worker.replica) and line, all of them at once,
// as errdefs field errors, so the CLI exits with the InvalidArgument code.
//
// Only structure and types are checked here. Whether a name is a valid DNS
// label, a topology matches the device type or a replica count is at least
// one is the server's validation, which the CLI reaches through CreateExp
// (with validate_only for `falcon exp validate`): one set of rules for every
// client.
//
// Three conveniences beyond the API's shape:
//   - config may be a YAML mapping or list instead of a string; it is
//     re-serialised to YAML text, because the API stores config as an opaque
//     string handed to the job as CUSTOM_CONFIG_KEY.
//   - resource quantities may be YAML numbers (cpu: 2) as well as strings
//     (memory: 4Gi); they are kept as written, since the API holds them as
//     strings.
//   - a top-level timeout_seconds is copied into every role that does not set
//     its own (a role's explicit 0, meaning no limit, is kept).
package manifest
