/* page.h — the page kronosd serves at / and its example series, built into the binary.
 *
 * page_assets.c is generated from index.html and tests/data/kline_5min.csv by embed.py
 * (a meson custom_target). */
#ifndef KD_PAGE_H
#define KD_PAGE_H

#include "app.h"
#include "http.h"

extern const unsigned char kd_page_html[];
extern const unsigned long kd_page_html_len;
extern const unsigned char kd_page_example_csv[];
extern const unsigned long kd_page_example_csv_len;

/* GET /: the page. GET /example.csv: the series it can forecast without a file. */
kd_outcome kd_handle_page(kd_app *app, kd_request *r);
kd_outcome kd_handle_example_csv(kd_app *app, kd_request *r);

#endif
