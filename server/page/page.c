/* page.c — serving the built-in page and example series. Neither needs the API key: the
 * page asks for it when the API answers 401. */
#include "page.h"

kd_outcome kd_handle_page(kd_app *app, kd_request *r) {
    (void)app;
    kd_reply_static(r, 200, "text/html; charset=utf-8", kd_page_html, kd_page_html_len);
    /* The page is self-contained; the browser holds it to that: it may talk to this server
     * and load nothing from anywhere else. */
    kd_reply_header(r, "Content-Security-Policy",
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action "
                    "'none'");
    return KD_REPLIED;
}

kd_outcome kd_handle_example_csv(kd_app *app, kd_request *r) {
    (void)app;
    kd_reply_static(r, 200, "text/csv; charset=utf-8", kd_page_example_csv,
                    kd_page_example_csv_len);
    return KD_REPLIED;
}
