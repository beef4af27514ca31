"""The Python client (clients/python/kronosd_client.py) against the real daemon.

Run by tests/python/run.sh, which starts kronosd with the fixture model and sets
KRONOSD_URL (no API key) and KRONOSD_KEY_URL + KRONOSD_KEY (with one). The DataFrame tests
skip when pandas is missing; KRONOSD_CLIENT_NO_PANDAS=1 runs the plain-dict path.
"""
import csv
import json
import os
import unittest
import urllib.request

import kronosd_client as kc
from kronosd_client import COLUMNS, Client, KronosdError

HERE = os.path.dirname(os.path.abspath(__file__))
SERIES = os.path.join(HERE, "..", "data", "kline_5min.csv")
URL = os.environ["KRONOSD_URL"]


def rows(n=120):
    with open(SERIES) as f:
        return list(csv.DictReader(f))[:n]


def columns(n=120):
    r = rows(n)
    out = {"timestamps": [x["timestamps"] for x in r]}
    for c in COLUMNS:
        out[c] = [float(x[c]) for x in r]
    return out


def raw_forecast(body, path="/forecast"):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as res:
        return json.loads(res.read())


class PlainClient(unittest.TestCase):
    """Works with or without pandas."""

    def setUp(self):
        self.kd = Client(URL)

    def test_health_and_model(self):
        self.assertEqual(self.kd.health(), {"status": "ok"})
        self.assertEqual(self.kd.model()["name"], "tiny")

    def test_forecast_matches_the_api(self):
        c = columns()
        fc = self.kd.forecast(c, horizon=6, samples=4, seed=5, quantiles=[0.1, 0.5, 0.9],
                              return_paths=True)
        raw = raw_forecast({"candles": c, "horizon": 6, "samples": 4, "seed": 5,
                            "quantiles": [0.1, 0.5, 0.9], "return_paths": True})
        self.assertEqual(fc.raw["mean"], raw["mean"])
        self.assertEqual(sorted(fc.quantiles), [0.1, 0.5, 0.9])
        self.assertEqual(len(fc.paths), 4)
        self.assertEqual(len(fc.prob_close_up), 6)

    def test_evaluate_matches_the_api(self):
        c = columns()
        ev = self.kd.evaluate(c, lookback=40, horizon=4, stride=20, samples=3, seed=2,
                              return_origins=True)
        raw = raw_forecast({"candles": c, "lookback": 40, "horizon": 4, "stride": 20,
                            "samples": 3, "seed": 2, "return_origins": True}, "/evaluate")
        for d in (ev.raw, raw):
            d.pop("usage")
        self.assertEqual(ev.raw, raw)
        self.assertEqual(len(ev.origins), raw["origins"])
        self.assertEqual(list(ev.model["mae"]), raw["model"]["mae"])
        self.assertEqual(list(ev.random_walk["coverage_0.1-0.9"]),
                         raw["random_walk"]["coverage"]["0.1-0.9"])
        self.assertEqual(list(ev.skill["crps_vs_random_walk"]),
                         raw["skill"]["random_walk"]["crps"])
        self.assertEqual(len(ev.pit_histogram), 10)
        seen = []
        streamed = self.kd.evaluate(c, lookback=40, horizon=4, stride=20, samples=3, seed=2,
                                    return_origins=True, progress=seen.append)
        streamed.raw.pop("usage")
        self.assertEqual(streamed.raw, raw)
        self.assertEqual([p["done"] for p in seen], list(range(raw["origins"])))
        with self.assertRaises(KronosdError) as e:
            self.kd.evaluate(c, lookback=1, horizon=4, progress=seen.append)
        self.assertEqual(e.exception.status, 400)
        with self.assertRaises(KronosdError) as e:
            self.kd.evaluate(c, lookback=1, horizon=4)
        self.assertEqual((e.exception.status, e.exception.message[:9]), (400, "lookback:"))

    def test_evaluate_series_matches_the_api(self):
        a, b = columns(), columns(240)
        b = {k: (a["timestamps"] if k == "timestamps" else v[120:]) for k, v in b.items()}
        opts = {"stride": 20, "samples": 3, "seed": 2, "return_origins": True}
        cs = self.kd.evaluate_series({"a": a, "b": b, "c": a}, lookback=40, horizon=4,
                                     **opts)
        raw = raw_forecast({"series": [{"candles": a}, {"candles": b}, {"candles": a}],
                            "lookback": 40, "horizon": 4, **opts}, "/evaluate")
        for d in (cs.raw, raw):
            for e in d["series"]:
                e.pop("usage")
        self.assertEqual(cs.raw, raw)
        self.assertEqual(sorted(cs.series), ["a", "b", "c"])
        self.assertEqual(cs.series["b"].raw, raw["series"][1])
        self.assertEqual(list(cs.cross_section["hit_rate"]), raw["cross_section"]["hit_rate"])
        self.assertEqual(list(cs.cross_section["ic_count"]),
                         raw["cross_section"]["per_step"]["ic_count"])
        self.assertEqual((cs.summary["top_k"], cs.summary["series"]), (1, 3))
        self.assertEqual(len(cs.origins), raw["cross_section"]["origins"])
        seen = []
        listed = self.kd.evaluate_series([a, b, a], lookback=40, horizon=4, progress=seen.append,
                                         cross_section_top_k=1, **opts)
        self.assertEqual(len(listed.series), 3)
        self.assertEqual(seen[0]["total"], 3 * raw["cross_section"]["origins"])
        with self.assertRaises(KronosdError) as e:
            self.kd.evaluate_series([a, b], lookback=40, horizon=4, cross_section_top_k=2)
        self.assertTrue(e.exception.message.startswith("cross_section.top_k:"), e.exception)

    def test_calibration_both_ways(self):
        c = columns(400)
        ev = self.kd.evaluate(c, lookback=64, horizon=4, stride=4, samples=4, seed=2,
                              calibration="rolling", calibration_warmup=20)
        raw = raw_forecast({"candles": c, "lookback": 64, "horizon": 4, "stride": 4,
                            "samples": 4, "seed": 2, "calibration": "rolling",
                            "calibration_warmup": 20}, "/evaluate")
        self.assertEqual(ev.scored_origins, raw["scored_origins"])
        self.assertEqual(list(ev.calibrated["coverage_0.1-0.9"]),
                         raw["calibrated"]["coverage"]["0.1-0.9"])
        self.assertEqual(list(ev.model_scored["crps_quantile"]),
                         raw["model_scored"]["crps_quantile"])
        self.assertEqual(ev.pit_ks, raw["pit_ks"])
        self.assertEqual(list(ev.reliability["calibrated"]["count"]),
                         raw["reliability"]["calibrated"]["count"])
        self.assertEqual(ev.calibration, raw["calibration"])
        w = {k: v[-64:] for k, v in c.items()}
        fc = self.kd.forecast(w, horizon=4, samples=4, calibration=ev)
        api = raw_forecast({"candles": w, "horizon": 4, "samples": 4,
                            "calibration": raw["calibration"]})
        self.assertTrue(fc.calibrated)
        self.assertEqual(fc.calibration, api["calibration"])
        self.assertEqual(list(fc.prob_close_up), api["prob_close_up"])
        self.assertEqual(list(fc.uncalibrated_prob_close_up), api["raw"]["prob_close_up"])
        self.assertEqual(sorted(fc.quantiles), [0.1, 0.5, 0.9])
        self.assertEqual(sorted(fc.uncalibrated_quantiles), [0.1, 0.5, 0.9])
        plain = self.kd.evaluate(c, lookback=64, horizon=4, stride=40)
        self.assertIsNone(plain.calibrated)
        self.assertIsNone(plain.calibration)

    def test_rows_input(self):
        r = [{"timestamp": x["timestamps"], **{c: float(x[c]) for c in COLUMNS}} for x in rows(50)]
        fc = self.kd.forecast(r, horizon=3)
        self.assertEqual(fc.raw["horizon"], 3)

    def test_errors_carry_code_status_message(self):
        with self.assertRaises(KronosdError) as cm:
            self.kd.forecast(columns(), horizon=0)
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "invalid_request"))
        self.assertTrue(e.message.startswith("horizon: must be an integer >= 1"), e.message)
        c = columns(10)
        c["close"][3] = float("nan")
        with self.assertRaises(KronosdError) as cm:
            self.kd.forecast(c, horizon=1)
        self.assertIn("candles.close[3]", cm.exception.message)
        with self.assertRaises(KronosdError) as cm:
            Client("http://127.0.0.1:1").health()
        self.assertEqual(cm.exception.code, "connection")

    def test_sessions_and_generate(self):
        tok = self.kd.tokenize(columns(40))
        ts = columns(42)["timestamps"]
        s = self.kd.create_session()["session"]
        out = self.kd.generate(session=s, tokens=tok["tokens"], timestamps=ts[:40],
                               max_new_tokens=2, future_timestamps=ts[40:42], top_k=1)
        self.assertEqual(len(out["tokens"]), 2)
        self.assertEqual(self.kd.get_session(s)["length"], 42)
        # one call with everything gives what the session's calls gave
        once = self.kd.generate(tokens=tok["tokens"], timestamps=ts[:40], max_new_tokens=2,
                                future_timestamps=ts[40:42], top_k=1)
        self.assertEqual(once["tokens"], out["tokens"])
        self.assertTrue(self.kd.delete_session(s)["deleted"])
        with self.assertRaises(KronosdError) as cm:
            self.kd.get_session(s)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "session_not_found"))

    def test_candle_session_calibrating_itself(self):
        c = columns(130)
        first = {k: v[:120] for k, v in c.items()}
        s = self.kd.create_candle_session(first, calibration="online")
        self.assertEqual(s["calibration"]["resolved"], 0)
        sid = s["session"]
        fc = self.kd.session_forecast(sid, horizon=2, samples=4, seed=5)
        self.assertTrue(fc.calibrated)
        self.assertEqual(sorted(fc.quantiles), [0.1, 0.5, 0.9])
        out = self.kd.append_candles(sid, {k: v[120:121] for k, v in c.items()})
        self.assertEqual(len(out["anomalies"]), 1)
        self.assertEqual(out["anomalies"][0]["step"], 1)
        lo, hi = fc.raw["quantiles"]["0.1"]["close"][0], fc.raw["quantiles"]["0.9"]["close"][0]
        y = c["close"][120]
        self.assertEqual(out["anomalies"][0]["outside"], [] if lo <= y <= hi else ["0.1-0.9"])
        cal = self.kd.get_session(sid)["calibration"]
        self.assertEqual((cal["mode"], cal["resolved"]), ("online", 1))
        self.assertEqual(cal["coverage"]["0.1-0.9"], 1.0 if lo <= y <= hi else 0.0)
        self.kd.delete_session(sid)

    def test_api_key(self):
        url, key = os.environ["KRONOSD_KEY_URL"], os.environ["KRONOSD_KEY"]
        with self.assertRaises(KronosdError) as cm:
            Client(url).model()
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        self.assertEqual(Client(url, api_key=key).model()["name"], "tiny")

    @unittest.skipIf(kc.pd is not None, "pandas is present")
    def test_plain_tables(self):
        c = columns()
        fc = self.kd.forecast(c, horizon=4, samples=3, quantiles=[0.5])
        self.assertEqual(fc.mean["timestamps"], fc.raw["timestamps"])
        self.assertEqual(fc.mean["close"], fc.raw["mean"]["close"])
        self.assertEqual(fc.quantiles[0.5]["open"], fc.raw["quantiles"]["0.5"]["open"])
        pred = self.kd.predict(c, c["timestamps"], fc.raw["timestamps"], pred_len=4)
        self.assertEqual(sorted(k for k in pred if k != "timestamps"), sorted(COLUMNS))


@unittest.skipIf(kc.pd is None, "pandas is not installed (or disabled)")
class PandasClient(unittest.TestCase):
    def setUp(self):
        import pandas as pd

        self.pd = pd
        self.kd = Client(URL)
        df = pd.read_csv(SERIES, nrows=120)
        df["timestamps"] = pd.to_datetime(df["timestamps"])
        self.df = df

    def test_forecast_dataframes(self):
        pd = self.pd
        fc = self.kd.forecast(self.df, horizon=5, samples=4, seed=2, quantiles=[0.25, 0.75],
                              return_paths=True)
        self.assertIsInstance(fc.mean, pd.DataFrame)
        self.assertEqual(list(fc.mean.columns), COLUMNS)
        self.assertIsInstance(fc.mean.index, pd.DatetimeIndex)
        self.assertEqual(len(fc.mean), 5)
        self.assertGreater(fc.mean.index[0], self.df["timestamps"].iloc[-1])
        self.assertEqual(sorted(fc.quantiles), [0.25, 0.75])
        self.assertTrue((fc.quantiles[0.25]["close"] <= fc.quantiles[0.75]["close"]).all())
        self.assertEqual(len(fc.paths), 4)
        self.assertEqual(list(fc.mean["close"]), fc.raw["mean"]["close"])

    def test_evaluate_dataframes(self):
        ev = self.kd.evaluate(self.df, lookback=40, horizon=4, stride=30, samples=2, seed=1)
        self.assertIsInstance(ev.model, self.pd.DataFrame)
        self.assertEqual(list(ev.model.index), [1, 2, 3, 4])
        self.assertIn("coverage_0.1-0.9", ev.model.columns)
        self.assertNotIn("brier", ev.persistence.columns)
        self.assertEqual(list(ev.overall.index), ["model", "persistence", "random_walk"])
        self.assertEqual(ev.overall.loc["model", "mae"], ev.raw["model"]["overall"]["mae"])
        cal = self.kd.evaluate(self.df, lookback=40, horizon=4, stride=4, samples=2, seed=1,
                               calibration="rolling", calibration_warmup=10)
        self.assertEqual(list(cal.overall.index),
                         ["model", "persistence", "random_walk", "model_scored", "calibrated"])
        self.assertEqual(cal.overall.loc["calibrated", "brier"],
                         cal.raw["calibrated"]["overall"]["brier"])
        self.assertIsInstance(cal.reliability["model"], self.pd.DataFrame)

    def test_evaluate_series_dataframes(self):
        later = self.pd.read_csv(SERIES, skiprows=range(1, 121), nrows=120)
        later["timestamps"] = self.df["timestamps"]  # the same origins at the same times
        cs = self.kd.evaluate_series([self.df, later, self.df], lookback=40, horizon=4,
                                     stride=30, samples=2, seed=1)
        self.assertIsInstance(cs.cross_section, self.pd.DataFrame)
        self.assertEqual(list(cs.cross_section.index), [1, 2, 3, 4])
        self.assertIn("rank_ic_ir", cs.cross_section.columns)
        self.assertIsInstance(cs.series[1].model, self.pd.DataFrame)

    def test_index_timestamps_and_same_as_columns(self):
        a = self.kd.forecast(self.df, horizon=3, seed=1)
        b = self.kd.forecast(self.df.set_index("timestamps"), horizon=3, seed=1)
        self.pd.testing.assert_frame_equal(a.mean, b.mean)

    def test_predict_has_upstreams_shape(self):
        pd = self.pd
        x_df = self.df[["open", "high", "low", "close", "volume", "amount"]]
        x_ts = self.df["timestamps"]
        y_ts = pd.Series(pd.date_range(x_ts.iloc[-1] + pd.Timedelta(minutes=5), periods=6,
                                       freq="5min"))
        pred = self.kd.predict(x_df, x_ts, y_ts, pred_len=6, T=1.0, top_p=0.9, sample_count=3)
        self.assertIsInstance(pred, pd.DataFrame)
        self.assertEqual(list(pred.columns), COLUMNS)
        self.assertEqual(list(pred.index), list(y_ts))
        fc = self.kd.forecast(x_df, timestamps=x_ts, future_timestamps=y_ts, samples=3,
                              temperature=1.0, top_k=0, top_p=0.9)
        self.assertEqual(list(pred["close"]), list(fc.mean["close"]))
        with self.assertRaises(ValueError):
            self.kd.predict(x_df, x_ts, y_ts, pred_len=5)

    def test_no_timestamps_is_a_clear_error(self):
        with self.assertRaises(ValueError):
            self.kd.forecast(self.df.drop(columns=["timestamps"]), horizon=2)

    def test_nan_is_refused_with_its_place(self):
        df = self.df.copy()
        df.loc[7, "high"] = float("nan")
        with self.assertRaises(KronosdError) as cm:
            self.kd.forecast(df, horizon=2)
        self.assertIn("candles.high[7]", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
