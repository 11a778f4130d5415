//! The OpenAPI document of the HTTP API (`/v1/openapi.json`), generated from the handlers'
//! `#[utoipa::path]` attributes and the wire types' `ToSchema` derives, so it cannot drift from
//! what the routes read and answer.
//!
//! Besides each route's own responses, [`document`] adds what every route of its kind can
//! answer (the error body is always [`AgentdError`], `{code, message}`): `400`, `403`
//! (`not_ancestor`, outside the `X-Agentd-Root` scope), `404`, `500` and `503` on the `/v1`
//! routes that reach agents; `408`, `413` and `415` where a route reads a JSON body; and, only when
//! the service requires a token, the bearer scheme with `401` on every route that needs it.
//!
//! The answers the routes assemble themselves (a command's acknowledgement, a checkpoint's
//! summary) are typed in `http/bodies.rs`; the schemathesis test
//! (`tests/tests/suite/openapi_conformance.rs`) checks the running service against them.
//!
//! This module sits above the routes it describes (`crate::http`, `crate::auth`), and serves
//! its document itself ([`routes`]), so nothing below it names it.

use agentd_proto::{AgentdError, Usage};
use utoipa::OpenApi;
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::schema::{AdditionalProperties, Schema, SchemaType, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Doc, Ref, RefOr, Response, ResponseBuilder};

/// The document's paths and schemas; [`document`] completes it.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentd",
        description = "LLM agents as actors: spawn, message, control, inspect."
    ),
    paths(
        crate::http::healthz,
        crate::http::readyz,
        crate::http::metrics,
        crate::http::info,
        serve,
        crate::http::events,
        crate::http::spawn,
        crate::http::list,
        crate::http::tree,
        crate::http::queue,
        crate::http::command,
        crate::http::invoke_tool_detached,
        crate::http::inspect,
        crate::http::delete,
        crate::http::send,
        crate::http::control,
        crate::http::reset,
        crate::http::compact,
        crate::http::set_budget,
        crate::http::provide_dependency,
        crate::http::answer_question,
        crate::http::thread,
        crate::http::children,
        crate::http::tools,
        crate::http::invoke_tool,
        crate::http::tool_result,
        crate::http::approve_tool,
        crate::http::tool_calls,
        crate::http::set_env,
        crate::http::checkpoints,
        crate::http::take_checkpoint,
        crate::http::checkpoint,
        crate::http::restore,
        crate::http::fork,
    ),
    components(schemas(AgentdError, Usage))
)]
pub struct ApiDoc;

/// Routes that answer before anything reaches an agent: no generic agent errors.
const PLAIN_ROUTES: [&str; 5] = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/info",
    "/v1/openapi.json",
];

/// Routes a token never guards ([`crate::auth::OPEN_PATHS`]).
fn is_open(path: &str) -> bool {
    crate::auth::OPEN_PATHS.contains(&path)
}

fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("AgentdError")))
                .build(),
        )
        .build()
}

/// An optional body (`request_body = Option<T>`) is generated as "`T` or `null`"; what the
/// routes take is no body or `T`, never a JSON `null`, so the `null` goes (the body stays not
/// required).
fn not_null_when_optional(body: &mut RequestBody) {
    let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
    for content in body.content.values_mut() {
        let RefOr::T(content) = content else { continue };
        if let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema
            && let [a, b] = one_of.items.as_slice()
            && is_null(a) != is_null(b)
        {
            let only = if is_null(a) { b } else { a };
            content.schema = Some(only.clone());
        }
    }
}

/// Closes the command shapes as serde reads them: a command naming a field its type does not
/// have is refused, so each variant says `additionalProperties: false`. utoipa leaves an
/// enum's variants open, and renders `spawn` as `allOf: [SpawnRequest, {type}]`, which a closed
/// `SpawnRequest` would make unsatisfiable (`type` is no field of it): that variant becomes one
/// closed object with `SpawnRequest`'s fields and the tag.
fn close_commands(doc: &mut Doc) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let spawn_request = match components.schemas.get("SpawnRequest") {
        Some(RefOr::T(Schema::Object(o))) => o.clone(),
        _ => return,
    };
    let Some(RefOr::T(Schema::OneOf(command))) = components.schemas.get_mut("Command") else {
        return;
    };
    for variant in &mut command.items {
        if let RefOr::T(Schema::AllOf(all)) = variant
            && matches!(all.items.first(), Some(RefOr::Ref(r)) if r.ref_location.ends_with("/SpawnRequest"))
        {
            let mut merged = spawn_request.clone();
            for part in &all.items[1..] {
                if let RefOr::T(Schema::Object(tag)) = part {
                    merged.properties.extend(tag.properties.clone());
                    merged.required.extend(tag.required.iter().cloned());
                }
            }
            merged.description = all.description.clone();
            *variant = RefOr::T(Schema::Object(merged));
        }
        if let RefOr::T(Schema::Object(o)) = variant {
            o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
        }
    }
}

/// The whole document as this service answers it: `auth_required` adds the bearer scheme.
pub fn document(auth_required: bool) -> Doc {
    let mut doc = ApiDoc::openapi();
    close_commands(&mut doc);
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    if auth_required && let Some(components) = doc.components.as_mut() {
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            item.get.as_mut(),
            item.post.as_mut(),
            item.put.as_mut(),
            item.delete.as_mut(),
            item.patch.as_mut(),
        ];
        for op in ops.into_iter().flatten() {
            let responses = &mut op.responses.responses;
            let mut add = |status: &str, description: &str| {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| error_response(description).into());
            };
            if !PLAIN_ROUTES.contains(&path.as_str()) {
                add("400", "`invalid_argument` or another refusal of the input");
                add("403", "`not_ancestor`: outside the `X-Agentd-Root` scope");
                add("404", "`agent_not_found` or another unknown name");
                add("500", "`store_error` or `internal`");
                add(
                    "503",
                    "`unavailable` (with `Retry-After`): the store is unreachable or failing over, the agent's owner did not answer, or fewer replicas than `redis.min_replicas` confirmed the write in time",
                );
            }
            if let Some(body) = op.request_body.as_mut() {
                if let RefOr::T(body) = body {
                    not_null_when_optional(body);
                }
                add(
                    "408",
                    "`request_timeout`: the body did not arrive within `server.request_timeout_ms`",
                );
                add("413", "`payload_too_large`: over `server.max_body_bytes`");
                add("415", "`unsupported_media_type`: the body is not JSON");
            }
            if auth_required && !is_open(path) {
                add("401", "`unauthorized`: missing or wrong bearer token");
                op.security = Some(vec![SecurityRequirement::new(
                    "bearer",
                    Vec::<String>::new(),
                )]);
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_declared_only_when_a_token_is_required() {
        let open = serde_json::to_value(document(false)).unwrap_or_default();
        assert!(open["components"]["securitySchemes"].is_null());
        assert!(open["paths"]["/v1/info"]["get"]["security"].is_null());
        let guarded = serde_json::to_value(document(true)).unwrap_or_default();
        assert_eq!(
            guarded["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        assert_eq!(
            guarded["paths"]["/v1/info"]["get"]["security"],
            serde_json::json!([{"bearer": []}])
        );
        assert!(guarded["paths"]["/healthz"]["get"]["security"].is_null());
        assert!(guarded["paths"]["/v1/info"]["get"]["responses"]["401"].is_object());
    }

    /// Walks `schema`, noting in `open` every object with fields that does not refuse others.
    fn note_open(
        schemas: &serde_json::Value,
        schema: &serde_json::Value,
        at: &str,
        seen: &mut std::collections::BTreeSet<String>,
        open: &mut Vec<String>,
    ) {
        if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
            // A control is one word tagged `type`: serde reads the tag and nothing else.
            if name != "Control" && seen.insert(name.to_string()) {
                note_open(schemas, &schemas[name], name, seen, open);
            }
            return;
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            for (n, part) in schema[key].as_array().into_iter().flatten().enumerate() {
                note_open(schemas, part, &format!("{at}/{key}/{n}"), seen, open);
            }
        }
        if let Some(fields) = schema["properties"].as_object() {
            if schema["additionalProperties"] != false {
                open.push(at.to_string());
            }
            for (name, field) in fields {
                note_open(schemas, field, &format!("{at}.{name}"), seen, open);
            }
        }
        if schema["items"].is_object() {
            note_open(schemas, &schema["items"], &format!("{at}[]"), seen, open);
        }
    }

    #[test]
    fn request_bodies_and_commands_refuse_fields_they_do_not_have() {
        let doc = serde_json::to_value(document(false)).unwrap_or_default();
        let schemas = &doc["components"]["schemas"];
        let (mut seen, mut open) = (std::collections::BTreeSet::new(), Vec::new());
        let mut bodies = 0;
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            // The tool's own arguments, which its schema checks.
            if path == "/v1/agents/{id}/tools/{tool}" {
                continue;
            }
            for (method, op) in item.as_object().into_iter().flatten() {
                let schema = &op["requestBody"]["content"]["application/json"]["schema"];
                if !schema.is_null() {
                    bodies += 1;
                    note_open(
                        schemas,
                        schema,
                        &format!("{method} {path}"),
                        &mut seen,
                        &mut open,
                    );
                }
            }
        }
        assert!(bodies >= 13, "{bodies} bodies");
        assert!(seen.contains("Command") && seen.contains("SpawnRequest"));
        assert!(open.is_empty(), "open to any field: {open:#?}");
        // The spawn command is one object: the request's fields and the tag.
        let spawn = schemas["Command"]["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["properties"]["type"]["enum"] == serde_json::json!(["spawn"]))
            .cloned()
            .unwrap_or_default();
        assert!(spawn["properties"]["prompt"].is_object(), "{spawn}");
        assert!(
            schemas["SpawnRequest"]["properties"]["on_dependency_failure"].is_object(),
            "{}",
            schemas["SpawnRequest"]
        );
        assert!(
            spawn["required"]
                .as_array()
                .is_some_and(|r| r.contains(&"type".into()))
        );
    }

    #[test]
    fn post_routes_declare_their_bodies_and_statuses() {
        let doc = serde_json::to_value(document(false)).unwrap_or_default();
        let spawn = &doc["paths"]["/v1/agents"]["post"];
        assert_eq!(
            spawn["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/SpawnRequest"
        );
        assert!(spawn["responses"]["201"].is_object());
        assert!(doc["paths"]["/v1/agents/{id}/messages"]["post"]["responses"]["202"].is_object());
        let list = &doc["paths"]["/v1/agents"]["get"]["parameters"][0];
        assert_eq!(
            (&list["name"], &list["in"]),
            (&"parent_id".into(), &"query".into())
        );
    }
}

/// Registers `GET /v1/openapi.json` (before the `/v1` scope of [`crate::http::routes`], which
/// would otherwise take the path).
pub fn routes(cfg: &mut actix_web::web::ServiceConfig) {
    use actix_web::web;
    cfg.service(web::resource("/v1/openapi.json").route(web::get().to(serve)));
}

/// This document.
#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "operations",
    responses(
        (status = 200, description = "The OpenAPI document", body = Object),
    )
)]
async fn serve(auth: actix_web::web::Data<crate::auth::Auth>) -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok().json(document(auth.token.is_some()))
}
