"""kronosd_client — a Python client for kronosd, the Kronos inference daemon.

Standard library only (urllib); pandas is used when it is installed:

    from kronosd_client import Client
    kd = Client("http://127.0.0.1:8080", api_key=None)
    fc = kd.forecast(df, horizon=24, samples=20, quantiles=[0.1, 0.5, 0.9])
    fc.mean                 # DataFrame indexed by timestamp: open high low close volume amount
    fc.quantiles[0.9]       # the same for each level
    fc.paths                # one DataFrame per sample path (return_paths=True)

    # upstream Kronos's KronosPredictor.predict, same arguments and return shape
    pred_df = kd.predict(df, x_timestamp, y_timestamp, pred_len=24, T=1.0, top_p=0.9,
                         sample_count=1)

Without pandas, a table is a dict {"timestamps": [...], "open": [...], ...} and candles may
be given the same way (or as a list of row dicts). Every error the server reports raises
KronosdError with its HTTP status, code and message.
"""

import datetime as _dt
import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request

try:  # KRONOSD_CLIENT_NO_PANDAS=1 tests the plain-dict path on a machine with pandas
    if os.environ.get("KRONOSD_CLIENT_NO_PANDAS"):
        raise ImportError("disabled")
    import pandas as pd
except ImportError:
    pd = None

__all__ = ["Client", "Forecast", "Evaluation", "CrossSectionEvaluation", "KronosdError",
           "COLUMNS"]
__version__ = "0.1.0"

COLUMNS = ["open", "high", "low", "close", "volume", "amount"]
_TIME_NAMES = ("timestamps", "timestamp", "date")


class KronosdError(Exception):
    """An error answered by kronosd (or the connection failing: status 0, code "connection")."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Forecast:
    """A forecast: mean, quantiles {level: table}, paths [table], prob_close_up, usage.

    A table is a DataFrame indexed by timestamp with pandas, else a dict of lists with a
    "timestamps" key. quantiles and paths are empty unless asked for. Calibrated (a
    calibration object given): calibrated is True, quantiles and prob_close_up are the
    calibrated close (tables of one column, close), uncalibrated_quantiles and
    uncalibrated_prob_close_up the model's own, calibration what calibrated it."""

    def __init__(self, raw):
        self.raw = raw
        ts = raw["timestamps"]
        self.timestamps = ts
        self.mean = _table(ts, raw["mean"])
        self.quantiles = {float(k): _table(ts, v) for k, v in raw.get("quantiles", {}).items()}
        self.paths = [_table(ts, p) for p in raw.get("paths", [])]
        self.prob_close_up = _series(ts, raw.get("prob_close_up"))
        self.usage = raw.get("usage", {})
        self.model = raw.get("model")  # {"id", "hash"}: the model that answered
        self.calibrated = raw.get("calibrated", False)
        self.calibration = raw.get("calibration")
        unc = raw.get("raw", {})
        self.uncalibrated_quantiles = {float(k): _table(ts, v)
                                       for k, v in unc.get("quantiles", {}).items()}
        self.uncalibrated_prob_close_up = _series(ts, unc.get("prob_close_up"))

    def __repr__(self):
        return (f"<Forecast horizon={self.raw['horizon']} samples={self.raw['samples']} "
                f"quantiles={sorted(self.quantiles)} paths={len(self.paths)}"
                f"{' calibrated' if self.calibrated else ''}>")


class Evaluation:
    """A walk-forward evaluation (POST /evaluate): per-step tables of the scores for the
    model and the two baselines (model, persistence, random_walk: one row per step 1..P,
    one column per metric, coverage as "coverage_0.1-0.9"), overall (one row per
    forecaster), skill (one row per step, columns "mae_vs_persistence", ...),
    pit_histogram (10 shares) and origins (the by_origin detail, with return_origins).

    With a calibration ("rolling" or an object): calibrated and model_scored (the raw model
    on the same scored origins, plus crps_quantile) as per-step tables and rows of overall,
    scored_origins, calibrated_pit_histogram, pit_ks {"model", "model_scored",
    "calibrated"}, reliability {kind: table of count, mean_prob, observed per bin} and
    calibration (the object: pass it to forecast(calibration=...)); else these are None.

    A table is a DataFrame with pandas, else a dict of lists ("step" first)."""

    FORECASTERS = ("model", "persistence", "random_walk")

    def __init__(self, raw):
        self.raw = raw
        steps = list(range(1, raw["horizon"] + 1))
        for f in self.FORECASTERS:
            setattr(self, f, _steps_table(steps, _flat_scores(raw[f])))
        over = {f: _flat_scores(raw[f]["overall"]) for f in self.FORECASTERS}
        if pd is not None:
            self.overall = pd.DataFrame.from_dict(over, orient="index")
        else:
            self.overall = over
        skill = {}
        for b in ("persistence", "random_walk"):
            for m in ("mae", "crps"):
                skill[f"{m}_vs_{b}"] = raw["skill"][b][m]
        self.skill = _steps_table(steps, skill)
        self.pit_histogram = raw["pit_histogram"]
        self.origins = raw.get("by_origin", [])
        self.usage = raw.get("usage", {})
        self.model_ref = raw.get("model_ref")  # {"id", "hash"}: the model that answered
        self._calibrated(raw, steps, over)

    def _calibrated(self, raw, steps, over):
        kinds = ("model_scored", "calibrated")
        for f in kinds:
            setattr(self, f, _steps_table(steps, _flat_scores(raw[f])) if f in raw else None)
        self.scored_origins = raw.get("scored_origins")
        self.calibrated_pit_histogram = raw.get("calibrated_pit_histogram")
        self.pit_ks = raw.get("pit_ks")
        self.calibration = raw.get("calibration")
        self.reliability = None
        if "calibrated" not in raw:
            return
        bins = list(range(1, len(raw["reliability"]["edges"])))
        self.reliability = {k: _steps_table(bins, raw["reliability"][k])
                            for k in ("model", "model_scored", "calibrated")}
        for f in kinds:
            over[f] = _flat_scores(raw[f]["overall"])
        if pd is not None:
            self.overall = pd.DataFrame.from_dict(over, orient="index")

    def __repr__(self):
        return (f"<Evaluation origins={self.raw['origins']} horizon={self.raw['horizon']} "
                f"samples={self.raw['samples']} mode={self.raw['mode']}>")


class CrossSectionEvaluation:
    """Many aligned series evaluated together (POST /evaluate with "series"): series, one
    Evaluation each (a dict by name when they were given by name, else a list);
    cross_section, one row per step 1..P with the columns ic, rank_ic, hit_rate,
    top_bottom_spread and the per-step ic_std, ic_ir, ic_count, rank_ic_std, rank_ic_ir,
    rank_ic_count; summary, the scalars (series, origins, top_k, ic_mean, ic_std, ic_ir,
    ic_count, ic_undefined and the same for rank_ic); origins, the cross-section's
    by_origin detail (with return_origins). An undefined IC is None (NaN in a DataFrame)."""

    PER_STEP = ("ic", "rank_ic", "hit_rate", "top_bottom_spread")

    def __init__(self, raw, names=None):
        self.raw = raw
        evs = [Evaluation(r) for r in raw["series"]]
        self.series = dict(zip(names, evs)) if names is not None else evs
        cs = raw["cross_section"]
        cols = {k: cs[k] for k in self.PER_STEP}
        cols.update(cs["per_step"])
        self.cross_section = _steps_table(list(range(1, cs["horizon"] + 1)), cols)
        self.summary = {k: v for k, v in cs.items()
                        if k not in self.PER_STEP and k not in ("per_step", "by_origin")}
        self.origins = cs.get("by_origin", [])

    def __repr__(self):
        s = self.summary
        return (f"<CrossSectionEvaluation series={s['series']} origins={s['origins']} "
                f"top_k={s['top_k']} ic_mean={s['ic_mean']} rank_ic_mean={s['rank_ic_mean']}>")


def _flat_scores(d):
    out = {k: v for k, v in d.items() if k not in ("coverage", "overall")}
    for pair, v in d.get("coverage", {}).items():
        out["coverage_" + pair] = v
    return out


def _steps_table(steps, cols):
    if pd is None:
        t = {"step": steps}
        t.update(cols)
        return t
    return pd.DataFrame(cols, index=pd.Index(steps, name="step"), dtype="float64")


def _series(ts, values):
    if values is not None and pd is not None:
        return pd.Series(values, index=_index(ts), name="prob_close_up", dtype="float64")
    return values


def _index(ts):
    # the server writes timestamps the way the input's last one was written
    if ts and isinstance(ts[0], str):
        return pd.DatetimeIndex(pd.to_datetime(ts), name="timestamps")
    return pd.Index(ts, name="timestamps")


def _table(ts, cols):
    if pd is None:
        t = {"timestamps": list(ts)}
        t.update({c: cols[c] for c in COLUMNS if c in cols})
        return t
    return pd.DataFrame({c: cols[c] for c in COLUMNS if c in cols}, index=_index(ts),
                        dtype="float64")


def _stamp(t):
    """A timestamp as the API takes it: ISO 8601 text or Unix seconds."""
    if t is None:
        return None
    if pd is not None and isinstance(t, pd.Timestamp):
        return t.isoformat()
    if isinstance(t, (_dt.datetime, _dt.date)):
        return t.isoformat()
    if hasattr(t, "item"):  # numpy scalars: datetime64 via pandas, numbers as numbers
        if pd is not None and "datetime64" in str(getattr(t, "dtype", "")):
            return pd.Timestamp(t).isoformat()
        return t.item()
    return t


def _number(x):
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None  # the server names the candle and column
    return x


def _stamps(seq):
    if seq is None:
        return None
    return [_stamp(t) for t in list(seq)]


def _candles(df, timestamps=None):
    """CANDLES of the API from a DataFrame (timestamps in a column or the index), a dict of
    columns or a list of row dicts."""
    if pd is not None and isinstance(df, pd.DataFrame):
        cols = {str(c).lower(): c for c in df.columns}
        if timestamps is not None:
            ts = list(timestamps)
        else:
            name = next((cols[n] for n in _TIME_NAMES if n in cols), None)
            if name is None and isinstance(df.index, pd.RangeIndex):
                raise ValueError("candles: no timestamps; give a timestamps (or timestamp, "
                                 "date) column, a DatetimeIndex, or timestamps=")
            ts = list(df[name]) if name is not None else list(df.index)
        out = {"timestamps": _stamps(ts)}
        for c in COLUMNS:
            if c in cols:
                out[c] = [_number(x) for x in df[cols[c]].tolist()]
        return out
    if isinstance(df, dict):
        out = {}
        for k, v in df.items():
            k = "timestamps" if k in _TIME_NAMES else k
            out[k] = _stamps(v) if k == "timestamps" else [_number(x) for x in v]
        if timestamps is not None:
            out["timestamps"] = _stamps(timestamps)
        return out
    if isinstance(df, (list, tuple)):
        rows = [dict(r) for r in df]
        for r in rows:
            for k in list(r):
                r[k] = _stamp(r[k]) if k in _TIME_NAMES else _number(r[k])
        return rows
    raise TypeError("candles: expected a DataFrame, a dict of columns or a list of row dicts, "
                    f"got {type(df).__name__}")


class Client:
    """kronosd at url (e.g. "http://127.0.0.1:8080"); api_key when the server has one;
    model: the id of the model every call runs on unless it names one (None: the server's
    default). Every model call takes model= too."""

    def __init__(self, url, api_key=None, timeout=300, model=None, admin_key=None):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.admin_key = admin_key  # for POST /models and the /finetune routes
        self.timeout = timeout
        self.default_model = model

    def _model(self, body, model):
        """body with the call's model (or the client's), when there is one."""
        m = model if model is not None else self.default_model
        if m is not None:
            body["model"] = m
        return body

    # ---- transport ---------------------------------------------------------------------
    def _call(self, method, path, body=None, query=None, key=None):
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        if key or self.api_key:
            headers["Authorization"] = "Bearer " + (key or self.api_key)
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read().decode())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                err = json.loads(text)["error"]
                raise KronosdError(e.code, err.get("code", "error"), err.get("message", text)) from None
            except (ValueError, KeyError, TypeError):
                raise KronosdError(e.code, "http_error", text.strip() or e.reason) from None
        except urllib.error.URLError as e:
            raise KronosdError(0, "connection", f"{url}: {e.reason}") from None

    # ---- service -----------------------------------------------------------------------
    def health(self):
        return self._call("GET", "/health")

    def model(self):
        return self._call("GET", "/model")

    def models(self):
        """GET /models: every model's entry (id, hash, default, tokenizer, predictor,
        parameters, bytes, kernels, loaded_at), the default first."""
        return self._call("GET", "/models")["models"]

    def get_model(self, model_id):
        return self._call("GET", "/models/" + urllib.parse.quote(model_id, safe=""))

    def load_model(self, path, model_id=None, admin_key=None):
        """POST /models: loads the server's folder path (tokenizer/ and predictor/) as a
        model (id: model_id, else the folder's name), with an admin key; its entry."""
        body = {"path": path}
        if model_id is not None:
            body["id"] = model_id
        return self._call("POST", "/models", body, key=admin_key)

    def unload_model(self, model_id, admin_key=None, purge=False):
        """DELETE /models/{id}, with an admin key: {"id", "unloaded": true} (a fine-tuned
        model's answer adds its kept "checkpoint" and "loads_at_start"). purge=True removes
        a fine-tuned model for good: its checkpoint and job too ({"purged": true})."""
        return self._call("DELETE", "/models/" + urllib.parse.quote(model_id, safe=""),
                          query={"purge": "true"} if purge else None,
                          key=admin_key or self.admin_key)

    # ---- forecasts ---------------------------------------------------------------------
    def forecast(self, df, horizon=None, future_timestamps=None, samples=None, temperature=None,
                 top_k=None, top_p=None, quantiles=None, seed=None, return_paths=None,
                 max_context=None, use_cache=None, timestamps=None, calibration=None,
                 model=None):
        """POST /forecast. df: the context candles; horizon defaults to the number of
        future_timestamps. calibration: an object (an Evaluation's calibration, or the
        Evaluation itself) to answer the close calibrated. Returns a Forecast."""
        if horizon is None:
            if future_timestamps is None:
                raise ValueError("forecast: give horizon or future_timestamps")
            horizon = len(future_timestamps)
        body = {"candles": _candles(df, timestamps), "horizon": int(horizon)}
        opts = {"future_timestamps": _stamps(future_timestamps), "samples": samples,
                "temperature": temperature, "top_k": top_k, "top_p": top_p,
                "quantiles": None if quantiles is None else [float(q) for q in quantiles],
                "seed": seed, "return_paths": return_paths, "max_context": max_context,
                "use_cache": use_cache,
                "calibration": (calibration.calibration if isinstance(calibration, Evaluation)
                                else calibration)}
        body.update({k: v for k, v in opts.items() if v is not None})
        return Forecast(self._call("POST", "/forecast", self._model(body, model)))

    def predict(self, df, x_timestamp, y_timestamp, pred_len, T=1.0, top_k=0, top_p=0.9,
                sample_count=1, verbose=False, model=None):
        """Upstream Kronos's KronosPredictor.predict: the mean forecast of sample_count
        paths, columns open, high, low, close, volume, amount, indexed by y_timestamp."""
        del verbose  # upstream prints progress; the server does the work here
        y = list(y_timestamp)
        if len(y) != pred_len:
            raise ValueError(f"y_timestamp has {len(y)} timestamps, but pred_len is {pred_len}")
        fc = self.forecast(df, horizon=pred_len, future_timestamps=y, samples=sample_count,
                           temperature=T, top_k=top_k, top_p=top_p, timestamps=x_timestamp,
                           model=model)
        if pd is None:
            return fc.mean
        idx = y_timestamp if isinstance(y_timestamp, pd.Index) else pd.Index(y)
        if isinstance(y_timestamp, pd.Series):
            idx = pd.Index(y_timestamp.values, name=y_timestamp.name)
        return pd.DataFrame({c: fc.raw["mean"][c] for c in COLUMNS}, index=idx, dtype="float64")

    def evaluate(self, df, lookback, horizon, stride=None, first_origin=None, last_origin=None,
                 samples=None, temperature=None, top_k=None, top_p=None, seed=None,
                 max_context=None, quantiles=None, mode=None, normalization=None,
                 return_origins=None, timeout_ms=None, timestamps=None, progress=None,
                 calibration=None, calibration_warmup=None, model=None):
        """POST /evaluate: a walk-forward evaluation of the model on df (every origin's
        forecast against what happened and two baselines). calibration: "rolling" (score
        the calibrated forecaster beside the raw one, learned without look-ahead, and fit
        an object) or an object to apply. Returns an Evaluation.
        progress: called with {"done", "total", "elapsed_ms"} as origins end (the answer
        is then read as an event stream)."""
        body = {"candles": _candles(df, timestamps), "lookback": int(lookback),
                "horizon": int(horizon)}
        opts = {"stride": stride, "first_origin": first_origin, "last_origin": last_origin,
                "samples": samples, "temperature": temperature, "top_k": top_k, "top_p": top_p,
                "seed": seed, "max_context": max_context,
                "quantiles": None if quantiles is None else [float(q) for q in quantiles],
                "mode": mode, "normalization": normalization, "return_origins": return_origins,
                "timeout_ms": timeout_ms, "calibration": calibration,
                "calibration_warmup": calibration_warmup}
        body.update({k: v for k, v in opts.items() if v is not None})
        self._model(body, model)
        if progress is None:
            return Evaluation(self._call("POST", "/evaluate", body))
        return Evaluation(self._events("/evaluate", body, progress))

    def evaluate_series(self, dfs, lookback, horizon, cross_section_top_k=None, progress=None,
                        timestamps=None, model=None, **options):
        """POST /evaluate with "series": the same walk-forward evaluation of many aligned
        series (a list of tables, or a dict name -> table), each answered as evaluate()
        would answer it alone, and their cross-sectional scores (IC, RankIC, hit rate,
        top-k minus bottom-k spread). cross_section_top_k: the spread's k (default a fifth
        of the series); top_k stays the sampling field. options: evaluate()'s other
        fields. Returns a CrossSectionEvaluation."""
        names = list(dfs) if isinstance(dfs, dict) else None
        tables = [dfs[n] for n in names] if names is not None else list(dfs)
        body = {"series": [{"candles": _candles(t, timestamps)} for t in tables],
                "lookback": int(lookback), "horizon": int(horizon)}
        if options.get("quantiles") is not None:
            options["quantiles"] = [float(q) for q in options["quantiles"]]
        body.update({k: v for k, v in options.items() if v is not None})
        if cross_section_top_k is not None:
            body["cross_section"] = {"top_k": int(cross_section_top_k)}
        self._model(body, model)
        if progress is None:
            return CrossSectionEvaluation(self._call("POST", "/evaluate", body), names)
        return CrossSectionEvaluation(self._events("/evaluate", body, progress), names)

    def _events(self, path, body, progress):
        """POST body, read as a text/event-stream: progress events to progress(), the
        result event's data returned, an error event raised."""
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(self.url + path, data=json.dumps(body, allow_nan=False).encode(),
                                     method="POST", headers=headers)
        try:
            res = urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError:  # refused before it started: a plain JSON error
            return self._call("POST", path, body)
        except urllib.error.URLError as e:
            raise KronosdError(0, "connection", f"{self.url + path}: {e.reason}") from None
        with res:
            event = None
            for raw in res:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if event == "progress":
                        progress(data)
                    elif event == "result":
                        return data
                    elif event == "error":
                        e = data["error"]
                        raise KronosdError(e.get("status", 500), e["code"], e["message"])
        raise KronosdError(0, "connection", f"{self.url + path}: the stream ended without a result")

    # ---- fine-tuning (the admin key) ---------------------------------------------------
    def finetune(self, data, model=None, id=None, wait=True, poll=1.0, progress=None,
                 timestamps=None, **settings):
        """POST /finetune: fine-tunes model's predictor (the base; default the client's or
        the server's) on data (a table, or a list of tables: several series) with settings
        as kronosd finetune takes them (steps, epochs, batch, lookback, predict, lr, depth,
        s2_condition, seed, validation_share, eval_every, patience, gate_samples); id: the
        model it registers as. With wait, polls the job every poll seconds (progress(job)
        after each) until it ends and returns it: "model" is the registered id, "gate" the
        base against the tuned model on the held-out part; a failed job raises. Without
        wait, returns the queued job."""
        tables = data if isinstance(data, (list, tuple)) else None
        body = ({"series": [{"candles": _candles(t, timestamps)} for t in tables]} if tables
                else {"candles": _candles(data, timestamps)})
        body.update({k: v for k, v in settings.items() if v is not None})
        if id is not None:
            body["id"] = id
        self._model(body, model)
        job = self._call("POST", "/finetune", body, key=self.admin_key)
        while wait and job["state"] in ("queued", "running"):
            time.sleep(poll)
            job = self.finetune_job(job["id"])
            if progress is not None:
                progress(job)
        if job["state"] == "failed":
            raise KronosdError(422, "finetune_failed", job.get("error", "the job failed"))
        return job

    def finetune_job(self, job_id):
        """GET /finetune/{job}: state, step, steps, loss, validation, best_step, gate, model."""
        return self._call("GET", "/finetune/" + urllib.parse.quote(job_id, safe=""),
                          key=self.admin_key)

    def finetune_jobs(self):
        return self._call("GET", "/finetune", key=self.admin_key)["jobs"]

    def cancel_finetune(self, job_id):
        """DELETE /finetune/{job}: a queued job at once, a running one at its next step."""
        return self._call("DELETE", "/finetune/" + urllib.parse.quote(job_id, safe=""),
                          key=self.admin_key)

    # ---- tokens ------------------------------------------------------------------------
    def tokenize(self, df, model=None):
        return self._call("POST", "/tokenize", self._model({"candles": _candles(df)}, model))

    def detokenize(self, tokens, mean, std, model=None):
        return self._call("POST", "/detokenize",
                          self._model({"tokens": tokens, "mean": list(mean), "std": list(std)},
                                      model))

    # ---- sessions ----------------------------------------------------------------------
    def create_session(self, model=None):
        """POST /sessions: {"session": id, "max_context": ..., "ttl_seconds": ..., "model":
        {"id", "hash"}}: a token session bound to model (the client's, else the server's
        default)."""
        body = self._model({}, model)
        return self._call("POST", "/sessions", body if body else None)

    def create_candle_session(self, df, normalization=None, calibration=None, timestamps=None):
        """POST /sessions with candles: a live series. calibration: "online" (the session
        calibrates its own forecasts from the candles that arrive after them) or an object
        (an Evaluation's calibration, or the Evaluation) to start from. Returns the answer,
        {"session": id, "length": n, ...; "calibration": {...} when calibrating}."""
        body = {"candles": _candles(df, timestamps), "normalization": normalization,
                "calibration": (calibration.calibration if isinstance(calibration, Evaluation)
                                else calibration)}
        return self._call("POST", "/sessions", {k: v for k, v in body.items() if v is not None})

    def append_candles(self, session, df, timestamps=None):
        """POST /sessions/{id}/candles. A calibrating session's answer adds "anomalies": for
        each candle one of its forecasts had covered, {"timestamp", "step", "pit", "outside"}."""
        return self._call("POST", "/sessions/" + urllib.parse.quote(session, safe="") + "/candles",
                          {"candles": _candles(df, timestamps)})

    def session_forecast(self, session, horizon, samples=None, temperature=None, top_k=None,
                         top_p=None, quantiles=None, seed=None, return_paths=None):
        """POST /sessions/{id}/forecast: a Forecast (calibrated by the session's own
        calibration when it calibrates itself)."""
        opts = {"horizon": int(horizon), "samples": samples, "temperature": temperature,
                "top_k": top_k, "top_p": top_p, "seed": seed, "return_paths": return_paths,
                "quantiles": None if quantiles is None else [float(q) for q in quantiles]}
        return Forecast(self._call(
            "POST", "/sessions/" + urllib.parse.quote(session, safe="") + "/forecast",
            {k: v for k, v in opts.items() if v is not None}))

    def get_session(self, session):
        return self._call("GET", "/sessions/" + urllib.parse.quote(session, safe=""))

    def delete_session(self, session):
        return self._call("DELETE", "/sessions/" + urllib.parse.quote(session, safe=""))

    def generate(self, tokens=None, timestamps=None, max_new_tokens=0, future_timestamps=None,
                 session=None, stamps=None, future_stamps=None, temperature=None, top_k=None,
                 top_p=None, seed=None, model=None):
        """POST /generate: append tokens (pairs [s1, s2]) with their timestamps (or stamps),
        then sample max_new_tokens at future_timestamps (or future_stamps). A session runs
        on its own model (model, if given, must be it); without one, on model."""
        body = {"session": session, "tokens": tokens, "timestamps": _stamps(timestamps),
                "stamps": stamps, "max_new_tokens": max_new_tokens,
                "future_timestamps": _stamps(future_timestamps), "future_stamps": future_stamps,
                "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
        body = {k: v for k, v in body.items() if v is not None}
        if session is None or model is not None:
            self._model(body, model)
        return self._call("POST", "/generate", body)
