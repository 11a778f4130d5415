//! The web dashboard at `/`: a static page (HTML, CSS and a vanilla JS module) embedded in the
//! binary, so an operator needs nothing but agentd and a browser. The page itself carries no data
//! and needs no token; everything it shows comes from the `/v1` API, which it calls with the
//! bearer token the user types in (kept in `sessionStorage`).

use actix_web::{HttpResponse, web};

/// The page shell.
const INDEX_HTML: &str = include_str!("../dashboard/index.html");

/// The page's scripts (ES modules, no build step; `app.js` is the entry and its header says
/// how the modules import one another) and styles, each served under `/ui/<file>`.
const ASSETS: [(&str, &str, &str); 11] = [
    ("/ui/app.js", JS, include_str!("../dashboard/app.js")),
    ("/ui/util.js", JS, include_str!("../dashboard/util.js")),
    ("/ui/state.js", JS, include_str!("../dashboard/state.js")),
    ("/ui/api.js", JS, include_str!("../dashboard/api.js")),
    (
        "/ui/schedule.js",
        JS,
        include_str!("../dashboard/schedule.js"),
    ),
    ("/ui/tree.js", JS, include_str!("../dashboard/tree.js")),
    (
        "/ui/approvals.js",
        JS,
        include_str!("../dashboard/approvals.js"),
    ),
    ("/ui/detail.js", JS, include_str!("../dashboard/detail.js")),
    (
        "/ui/actions.js",
        JS,
        include_str!("../dashboard/actions.js"),
    ),
    ("/ui/stream.js", JS, include_str!("../dashboard/stream.js")),
    (
        "/ui/app.css",
        "text/css; charset=utf-8",
        include_str!("../dashboard/app.css"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

/// Paths of the static shell: served without auth (like `/healthz`), since they hold no data
/// and the page must load before it can ask for the token.
pub const SHELL_PATHS: [&str; 12] = [
    "/",
    ASSETS[0].0,
    ASSETS[1].0,
    ASSETS[2].0,
    ASSETS[3].0,
    ASSETS[4].0,
    ASSETS[5].0,
    ASSETS[6].0,
    ASSETS[7].0,
    ASSETS[8].0,
    ASSETS[9].0,
    ASSETS[10].0,
];

/// Everything the page loads comes from this origin; the policy makes the browser refuse
/// anything else (CDNs, external fonts, inline scripts).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Registers the dashboard's static routes: `/` and every asset under `/ui/`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/").route(web::get().to(index)));
    for (path, content_type, body) in ASSETS {
        cfg.service(
            web::resource(path)
                .route(web::get().to(move || async move { asset(content_type, body) })),
        );
    }
}

/// One embedded asset. `no-cache` makes the browser revalidate, so a new binary's page is
/// picked up at once; the assets are small.
fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", CSP))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(body)
}

async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_references_only_its_own_assets() {
        assert!(INDEX_HTML.contains("/ui/app.js"));
        assert!(INDEX_HTML.contains("/ui/app.css"));
        assert!(!INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"));
        for (_, _, body) in ASSETS {
            assert!(!body.contains("http://") && !body.contains("https://"));
        }
    }

    /// Every module a script imports is served (and so exempt from auth), and every served
    /// script is imported by one (no file left behind).
    #[test]
    fn every_imported_module_is_served() {
        let served: Vec<&str> = ASSETS.iter().map(|(path, _, _)| *path).collect();
        let mut imported = vec!["/ui/app.js".to_string()];
        for (path, content_type, body) in ASSETS {
            if content_type != JS {
                continue;
            }
            for line in body
                .lines()
                .filter(|l| l.starts_with("import ") || l.starts_with("} from "))
            {
                let Some(start) = line.find("'./") else {
                    continue;
                };
                let rest = &line[start + 3..];
                let name = &rest[..rest.find('\'').unwrap_or(rest.len())];
                let module = format!("/ui/{name}");
                assert!(
                    served.contains(&module.as_str()),
                    "{path} imports {module}, which is not served"
                );
                imported.push(module);
            }
        }
        for (path, content_type, _) in ASSETS {
            assert!(
                content_type != JS || imported.iter().any(|m| m == path),
                "{path} is served but never imported"
            );
        }
        assert!(SHELL_PATHS.iter().skip(1).eq(served.iter()));
    }
}
