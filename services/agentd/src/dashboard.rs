//! The web dashboard at `/`: a static page (HTML, CSS and a vanilla JS module) embedded in the
//! binary, so an operator needs nothing but agentd and a browser. The page itself carries no data
//! and needs no token; everything it shows comes from the `/v1` API, which it calls with the
//! bearer token the user types in (kept in `sessionStorage`).

use actix_web::{HttpResponse, web};

/// The page shell.
const INDEX_HTML: &str = include_str!("../dashboard/index.html");
/// The page's script (an ES module, no build step).
const APP_JS: &str = include_str!("../dashboard/app.js");
/// The page's styles.
const APP_CSS: &str = include_str!("../dashboard/app.css");

/// Paths of the static shell: served without auth (like `/healthz`), since they hold no data
/// and the page must load before it can ask for the token.
pub const SHELL_PATHS: [&str; 3] = ["/", "/ui/app.js", "/ui/app.css"];

/// Everything the page loads comes from this origin; the policy makes the browser refuse
/// anything else (CDNs, external fonts, inline scripts).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Registers the dashboard's static routes (`/`, `/ui/app.js`, `/ui/app.css`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/").route(web::get().to(index)))
        .service(web::resource("/ui/app.js").route(web::get().to(app_js)))
        .service(web::resource("/ui/app.css").route(web::get().to(app_css)));
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

async fn app_js() -> HttpResponse {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn app_css() -> HttpResponse {
    asset("text/css; charset=utf-8", APP_CSS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_references_only_its_own_assets() {
        assert!(INDEX_HTML.contains("/ui/app.js"));
        assert!(INDEX_HTML.contains("/ui/app.css"));
        for asset in [INDEX_HTML, APP_JS, APP_CSS] {
            assert!(!asset.contains("http://") && !asset.contains("https://"));
        }
    }
}
