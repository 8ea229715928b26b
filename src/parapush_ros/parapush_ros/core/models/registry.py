"""Every predictive model by name, and one entry point for predictions with any of them.

``MODELS`` is the one list of models: the predictor node, the planner, the benchmarks, the CLI and the ROS
parameter descriptions all take the names (and each model's options) from it. Adding a model is one file with a
class that keeps the ``Propagator`` contract (``core/models/base.py``) and one ``register_model`` line below.

A model is chosen by a ``ModelSpec``, parsed once from text such as ``parareal2`` (with the coarse and fine
propagators to use) and passed on as an object: planner parameter -> planner -> optimiser -> predictor ->
prediction -> plan message. Spec names: a registered model (``analytical``, ``learned``, ``fine``, ...),
``coarse`` (the predictor's default coarse model), ``parareal`` (default K) or ``pararealK`` (e.g. ``parareal2``).
"""
from __future__ import annotations

import importlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from ..scene.spec import Scene
from .base import PredictionAbandoned, Propagator, UncertainPropagator, rollout, rollout_with_variance
from .parareal import CoarseChain, Parareal
from .quasistatic_convex import DEFAULT_CONTACT_HEIGHT, DEFAULT_LIMIT_SURFACE

COARSE = "coarse"  # role: cheap; a Parareal coarse propagator (and a model of its own)
FINE = "fine"  # role: the reference; a Parareal fine propagator (and a model of its own)
PARAREAL = "parareal"
AUTO = "auto"  # coarse_model: the best coarse model for the scene (``auto_coarse``)
DEFAULT_COARSE = AUTO  # the coarse model (and Parareal's coarse propagator) unless one is named: the best for the scene
# ``auto_coarse``'s rule in a line, for the help texts of the parameter, the launch argument and ``parapush sim``
AUTO_COARSE_RULE = ("auto: the quasi-static model of the object's convex footprint for one object; learned where it "
                    "fits, else analytical, for several")
DEFAULT_FINE = "fine"  # the fine model (and Parareal's fine propagator) unless one is named
DEFAULT_MODEL = "parareal1"  # what a planner predicts with unless told (paper 000: one Parareal iteration)


@dataclass(frozen=True)
class ModelOption:
    """A keyword argument of a model's factory, exposed as the ROS parameter ``parameter`` (default
    ``<model>_<option>``) on the nodes that predict."""

    default: object
    description: str
    parameter: str = ""


@dataclass(frozen=True)
class ModelEntry:
    name: str
    factory: str  # "module:attribute" (module relative to parapush_ros.core.models), imported on first use
    role: str  # COARSE or FINE
    description: str
    options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def parameter(self, option: str) -> str:
        return self.options[option].parameter or f"{self.name}_{option}"

    def build(self, scene: Scene, **options) -> Propagator:
        """The model for ``scene``; ``options`` are the factory's keyword arguments (unknown ones are refused)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"model {self.name!r}: unknown option(s) {unknown} (known: {sorted(self.options)})")
        module, _, attr = self.factory.partition(":")
        obj = importlib.import_module(module, __package__)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj(scene, **options)


MODELS: dict[str, ModelEntry] = {}


def register_model(name: str, factory: str, role: str, description: str, options: dict | None = None) -> ModelEntry:
    """Make a model known to every part of parapush by ``name`` (see the module docstring)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in (COARSE, PARAREAL) or name in MODELS:
        raise ValueError(f"register_model: {name!r} is not a free model name (lower-case identifier, not "
                         f"{COARSE!r}, {PARAREAL!r} or one already registered: {', '.join(MODELS)})")
    if role not in (COARSE, FINE):
        raise ValueError(f"register_model {name!r}: role must be {COARSE!r} or {FINE!r}, got {role!r}")
    MODELS[name] = ModelEntry(name, factory, role, description, MappingProxyType(dict(options or {})))
    return MODELS[name]


# ------------------------------------------------------------------------------------------- the models
register_model("analytical", ".analytical:AnalyticalCoarseModel", COARSE,
               "analytical pusher-slider model (paper 000 eq. 5-8)")
register_model("learned", ".learned:LearnedCoarseModel.load", COARSE,
               "MLP of paper 001, trained on the fine model (the four_cylinders family)",
               {"path": ModelOption("", "weights file for the learned coarse model; empty = the shipped weights",
                                    parameter="learned_weights")})
register_model("learned_ensemble", ".learned.ensemble:LearnedEnsembleModel.load", COARSE,
               "the learned coarse model as an E-MDN ensemble (paper 004): predicts its variance too",
               {"path": ModelOption("", "weights file for the learned ensemble; empty = the shipped weights",
                                    parameter="learned_ensemble_weights")})
register_model("quasistatic", ".quasistatic_coarse:QuasiStaticCoarseModel", COARSE,
               "quasi-static pusher-slider with limit surface and motion cone (paper 003; one box slider only)")
register_model("quasistatic_convex", ".quasistatic_coarse:QuasiStaticConvexCoarseModel", COARSE,
               "quasi-static pusher-slider for any convex footprint (disc, box, polygon, ellipse): limit surface of "
               "its support, load transfer, contact from the outline, motion cone; one object only",
               {"limit_surface": ModelOption(
                   DEFAULT_LIMIT_SURFACE, "limit surface of the quasistatic_convex model: integrated (the friction "
                   "summed over the support points, with load transfer; read from a table solved once per object) | "
                   "ellipsoid (one c = m_max / f_max)"),
                "support_points": ModelOption(
                    0, "support grid points per side of the integrated limit surface (2..9); 0 = the scene's support "
                       "grid (3 where its support is native)"),
                "contact_height": ModelOption(
                    DEFAULT_CONTACT_HEIGHT, "integrated limit surface: height (m) above the table at which the "
                    "pusher's force acts, for the load it shifts over the support; negative = the middle of the "
                    "side the pusher and the object share; 0 = no load transfer"),
                "close_gap": ModelOption(
                    True, "a gap up to the contact tolerance (5 mm) is crossed before the object moves (true) or kept "
                    "while the object moves as if touched (false: paper 003's rule)")})
register_model("fine", ".fine:FineModel", FINE, "MuJoCo, 2 ms CG steps of the 1 ms reference physics, resting "
                                                 "bodies asleep",
               {"threads": ModelOption(0, "threads for the fine model; 0 = all cores", parameter="threads")})


def predicts_slices(model, dt: float) -> bool:
    """Whether ``model`` predicts slices of ``dt`` seconds: any, unless it only predicts whole multiples of its
    ``slice_s`` (the learned model's 1 s)."""
    slice_s = getattr(model, "slice_s", None)
    if slice_s is None:
        return True
    k = round(dt / slice_s)
    return k >= 1 and abs(k * slice_s - dt) <= 1e-9


def auto_coarse(scene: Scene, options: dict | None = None, slice_s: float | None = None) -> tuple[str, str]:
    """``coarse_model: auto``: (the coarse model for ``scene``, why), by this rule, chosen by measurement
    (docs/results/fidelity.md):

    * one object: ``quasistatic_convex``, the quasi-static model of its convex footprint, box included (its
      integrated limit surface with load transfer is 1.5-5 times nearer replayed pushes than paper 003's box model
      ``quasistatic`` and 10-15 times nearer than ``analytical``, which is worse than predicting no motion);
    * several objects: ``learned`` where its weights' training conditions fit the scene (objects, friction,
      support: ``learned.family.check_family``) and it can predict slices of ``slice_s`` (the planner's control
      duration; it predicts whole 1 s slices), else ``analytical``.

    ``options``: the models' factory options by name (``learned``'s ``path``)."""
    if len(scene.objects) == 1:
        return "quasistatic_convex", f"one {scene.objects[0].shape}: the quasi-static model of its convex footprint"
    from .learned.family import LearnedModelError  # noqa: PLC0415
    try:
        learned = entry("learned").build(scene, **dict((options or {}).get("learned", {})))
    except LearnedModelError as e:
        return "analytical", f"{len(scene.objects)} objects, and the learned model does not fit: {e}"
    if slice_s is not None and not predicts_slices(learned, slice_s):
        return "analytical", (f"{len(scene.objects)} objects, and the learned model predicts whole "
                              f"{learned.slice_s:g} s slices, not controls of {slice_s:g} s")
    return "learned", f"{len(scene.objects)} objects within the learned model's training conditions"


def check_coarse_name(name: str, where: str = "coarse_model") -> str:
    """``name`` if it is a coarse model of the registry or ``auto``; else the ValueError of ``entry``."""
    if name == AUTO:
        return name
    return entry(name, COARSE, where).name


def coarse_choices() -> tuple[str, ...]:
    """What ``coarse_model`` may name: the registered coarse models and ``auto``."""
    return (*names(COARSE), AUTO)


def names(role: str | None = None) -> tuple[str, ...]:
    """Registered model names, of one role or all."""
    return tuple(n for n, e in MODELS.items() if role is None or e.role == role)


def entry(name: str, role: str | None = None, where: str = "model") -> ModelEntry:
    """The registry entry of ``name``; a ValueError naming ``where`` and the choices if there is none."""
    e = MODELS.get(name)
    if e is None or (role is not None and e.role != role):
        raise ValueError(f"{where}: {name!r} is not one of {names(role)}")
    return e


# ------------------------------------------------------------------------------------------- model specs
@dataclass(frozen=True)
class ModelSpec:
    """Which model predicts: a registered model, ``coarse`` (the predictor's default coarse model) or Parareal
    with K iterations of ``fine`` corrections on ``coarse``. ``None`` fields take the predictor's defaults."""

    kind: str
    iterations: int | None = None  # Parareal K
    coarse: str | None = None  # coarse propagator (for "parareal" and "coarse")
    fine: str | None = None  # fine propagator (for "parareal")

    @classmethod
    def parse(cls, spec, coarse: str | None = None, fine: str | None = None) -> ModelSpec:
        """Text such as 'parareal2', 'learned' or 'fine' (or a ModelSpec) -> a checked ModelSpec. ``coarse`` and
        ``fine`` fill the propagators the text leaves open. ValueErrors name the bad part."""
        if isinstance(spec, ModelSpec):
            parsed = spec
        else:
            text = str(spec).strip().lower()
            m = re.fullmatch(rf"{PARAREAL}(\d+)", text)
            if m:
                parsed = cls(PARAREAL, int(m.group(1)))
            elif text in MODELS or text in (COARSE, PARAREAL):
                parsed = cls(text)
            else:
                raise ValueError(f"unknown model {spec!r} (expected one of: {', '.join(spec_names())})")
        # the propagators are checked even where this kind does not use them: a bad parameter is named at once
        if coarse:
            check_coarse_name(coarse)
        if fine:
            entry(fine, FINE, "fine_model")
        if parsed.kind in (PARAREAL, COARSE):
            parsed = replace(parsed, coarse=parsed.coarse or coarse or None)
        if parsed.kind == PARAREAL:
            parsed = replace(parsed, fine=parsed.fine or fine or None)
        if parsed.coarse is not None:
            check_coarse_name(parsed.coarse)
        if parsed.fine is not None:
            entry(parsed.fine, FINE, "fine_model")
        return parsed

    @property
    def name(self) -> str:
        """The spec as text: 'parareal2', 'parareal' (default K), 'learned', ..."""
        return f"{self.kind}{self.iterations}" if self.kind == PARAREAL and self.iterations is not None else self.kind

    def __str__(self) -> str:
        return self.name

    @property
    def message_name(self) -> str:
        """``PushPlan.model``: the model without K, and "coarse" for the analytical model (the message's name)."""
        return COARSE if self.kind == "analytical" else self.kind


def spec_names() -> tuple[str, ...]:
    """What a model spec may name: the registered models, 'coarse', 'parareal' and 'parareal<K>'."""
    return (COARSE, *MODELS, PARAREAL, f"{PARAREAL}<K>")


def model_description() -> str:
    """What the ``model`` parameter of a node or a benchmark may name (from the registry)."""
    return f"predictive model: {' | '.join(spec_names())}"


def parameter_descriptions() -> dict[str, tuple[object, str]]:
    """The model parameters of a node that predicts: name -> (default, description), from the registry."""
    out = {
        "coarse_model": (DEFAULT_COARSE, f"coarse model (inside Parareal and for model 'coarse'): "
                                       f"{' | '.join(coarse_choices())} ({AUTO_COARSE_RULE})"),
        "fine_model": (DEFAULT_FINE, f"fine model (inside Parareal): {' | '.join(names(FINE))}"),
    }
    out["parareal_variance_threshold"] = (
        0.0, "uncertainty-aware Parareal (m): a trajectory stops iterating once the coarse model's variance of its "
             "slices not yet exact gives every object a position sigma <= this; needs a coarse model with a "
             "variance (learned_ensemble); 0 = fixed K")
    for e in MODELS.values():
        for option, o in e.options.items():
            out[e.parameter(option)] = (o.default, o.description)
    return out


def parse_model_options(items) -> dict:
    """``["model.option=value", ...]`` (a command line's ``--model-option``) -> ``{model: {option: value}}``, each
    value of its option's default's type (``quasistatic_convex.limit_surface=integrated``); unknown models or
    options are refused, naming the known ones."""
    out = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        name, dot, option = key.strip().partition(".")
        if not (eq and dot):
            raise ValueError(f"--model-option: {item!r} is not of the form model.option=value (e.g. "
                             "quasistatic_convex.limit_surface=integrated)")
        e = entry(name, where="--model-option")
        if option not in e.options:
            raise ValueError(f"--model-option: model {name!r} has no option {option!r} (known: "
                             f"{', '.join(e.options) or 'none'})")
        kind = type(e.options[option].default)
        text = value.strip()
        if kind is bool:  # bool("false") is True: spell it out
            if text.lower() not in ("true", "false"):
                raise ValueError(f"--model-option: {item!r}: {text!r} is not true or false")
            out.setdefault(name, {})[option] = text.lower() == "true"
            continue
        try:
            value_ = kind(text)
        except ValueError:
            raise ValueError(f"--model-option: {item!r}: {text!r} is not a {kind.__name__}") from None
        if kind is float and not math.isfinite(value_):  # no model option means anything at inf or NaN
            raise ValueError(f"--model-option: {item!r}: {text!r} is not a finite number")
        out.setdefault(name, {})[option] = value_
    return out


# ------------------------------------------------------------------------------------------- predictions
@dataclass
class Prediction:
    states: np.ndarray  # (M, N+1, D) or (N+1, D) for a single trajectory
    model: str  # the model that predicted, as text ("parareal2" with the iterations done, "analytical", ...)
    iterations: int = 0
    position_change: list = field(default_factory=list)
    yaw_change: list = field(default_factory=list)
    wall_time: float = 0.0
    fine_slices: int = 0
    spec: ModelSpec | None = None  # the model that predicted, resolved (no defaults left open)
    variance: np.ndarray | None = None  # like ``states``, when the model predicts its uncertainty
    history: list | None = None  # Parareal iterates (keep_history=True), iteration 0 first


class Predictor:
    """Holds the models of one scene (built on first use from the registry, then reused) and predicts with any.

    ``coarse`` and ``fine`` are the defaults a spec may leave open; ``options`` holds each model's factory
    options by model name (e.g. ``{"learned": {"path": weights_file}}``); ``threads`` goes to every model that takes
    it (the fine model)."""

    def __init__(self, scene: Scene, coarse: str = DEFAULT_COARSE, iterations: int = 1, tolerance: float = 0.0,
                 threads: int | None = None, options: dict | None = None, fine: str = DEFAULT_FINE,
                 variance_threshold: float = 0.0, slice_s: float | None = None):
        """``slice_s``: the slices the coarse model will predict (a planner's control duration), where known:
        ``auto`` then picks a model that can (``check_slices`` refuses a named one that cannot)."""
        self.scene = scene
        self.slice_s = slice_s
        self.options = {name: dict(o) for name, o in (options or {}).items()}
        for name in self.options:
            entry(name, where="model options")
        self.auto_reason = ""  # why ``auto`` chose the coarse model it did
        self.default_coarse = self._coarse_name(coarse)
        if not (math.isfinite(variance_threshold) and variance_threshold >= 0.0):
            raise ValueError(f"parareal_variance_threshold: must be >= 0 m and finite, got {variance_threshold}")
        self.variance_threshold = float(variance_threshold)  # uncertainty-aware Parareal (0: fixed K)
        self.default_fine = entry(fine, FINE, "fine_model").name
        self.default_iterations = int(iterations)
        self.tolerance = float(tolerance)
        self.threads = threads
        self._models = {}
        # what every prediction so far cost (a closed-loop bench reads them per run): fine slices computed and
        # trajectories predicted
        self.fine_slices = 0
        self.trajectories = 0
        if self.variance_threshold > 0.0 and not isinstance(self.coarse_model(), UncertainPropagator):
            # checked here, once: otherwise every Parareal prediction (every plan) fails with it
            raise ValueError(f"parareal_variance_threshold: {self.variance_threshold} m needs a coarse model that "
                             f"predicts its variance (learned_ensemble); coarse_model {self.default_coarse!r} "
                             f"does not")

    @classmethod
    def from_parameters(cls, scene: Scene, p: dict, **kwargs) -> Predictor:
        """A predictor from a node's parameters (``coarse_model``, ``fine_model``, ``threads`` and each model's
        options, as ``parameter_descriptions`` declares them)."""
        options = {e.name: {o: p[e.parameter(o)] for o in e.options if e.parameter(o) in p and o != "threads"}
                   for e in MODELS.values()}
        return cls(scene, coarse=p["coarse_model"], fine=p["fine_model"], threads=p.get("threads") or None,
                   options={k: v for k, v in options.items() if v},
                   variance_threshold=p.get("parareal_variance_threshold", 0.0), **kwargs)

    def _coarse_name(self, name: str) -> str:
        """A coarse model's name, ``auto`` resolved for this scene (once)."""
        if check_coarse_name(name) != AUTO:
            return name
        if not hasattr(self, "_auto"):
            self._auto, self.auto_reason = auto_coarse(self.scene, self.options, self.slice_s)
        return self._auto

    def model(self, name: str) -> Propagator:
        """The registered model ``name`` for this scene (built once)."""
        if name not in self._models:
            e = entry(name)
            options = dict(self.options.get(name, {}))
            if "threads" in e.options:
                options.setdefault("threads", self.threads)
            self._models[name] = e.build(self.scene, **options)
        return self._models[name]

    @property
    def fine(self) -> Propagator:
        return self.model(self.default_fine)

    def coarse_model(self, kind: str | None = None) -> Propagator:
        return self.model(entry(self._coarse_name(kind or self.default_coarse), COARSE, "coarse_model").name)

    def close(self):
        for m in self._models.values():
            if hasattr(m, "close"):
                m.close()

    def check_slices(self, spec, dt: float) -> None:
        """Refuse, naming the settings, a model ``spec`` whose coarse part cannot predict slices of ``dt``
        seconds (the learned model predicts whole 1 s slices): said at configuration, not at the first plan."""
        s = self.resolve(spec)
        coarse = s.coarse if s.kind == PARAREAL else s.kind if MODELS[s.kind].role == COARSE else None
        if coarse is not None and not predicts_slices(self.model(coarse), dt):
            raise ValueError(f"coarse_model {coarse!r} predicts whole {self.model(coarse).slice_s:g} s slices; "
                             f"control_duration {dt:g} s is not a multiple of them (coarse_model auto picks one "
                             f"that fits)")

    def resolve(self, spec, iterations: int | None = None) -> ModelSpec:
        """``spec`` with every open part filled from this predictor's defaults (an explicit K in the spec wins
        over ``iterations``, which wins over the default)."""
        s = ModelSpec.parse(spec)
        coarse = self._coarse_name(s.coarse or self.default_coarse)
        if s.kind == COARSE:
            return ModelSpec(coarse)
        if s.kind != PARAREAL:
            return ModelSpec(s.kind)
        k = s.iterations if s.iterations is not None else (
            self.default_iterations if iterations is None else int(iterations))
        return ModelSpec(PARAREAL, k, coarse, s.fine or self.default_fine)

    def predict(self, x0, controls, dt: float, model="parareal", iterations: int | None = None,
                tolerance: float | None = None, coarse: str | None = None,
                keep_history: bool = False, stop: Callable[[], bool] | None = None,
                coarse_chain: CoarseChain | None = None) -> Prediction:
        """Predict the states after each control. ``x0`` (D,) or (M, D); ``controls`` (N, 2) or (M, N, 2);
        ``model`` a ModelSpec or its text. ``stop`` (an anytime planner's deadline): asked between slices (Parareal:
        between its fine work, ``Parareal.solve``) once some are done; True raises ``PredictionAbandoned``, whose
        ``slices`` are the fine slices spent (0 for a coarse model). ``coarse_chain`` (Parareal only): iteration 0
        already rolled out on a coarse model of the spec's kind (the fast planner's screening model, at its own
        sub-step), which is then Parareal's coarse model (``Parareal.solve``)."""
        spec = self.resolve(ModelSpec.parse(model, coarse=coarse), iterations)
        x0 = np.asarray(x0, dtype=float)
        controls = np.asarray(controls, dtype=float)
        single = x0.ndim == 1
        if single:
            x0, controls = x0[None], controls[None]
        if controls.ndim != 3 or controls.shape[-1] != 2 or controls.shape[0] != x0.shape[0]:
            raise ValueError(f"controls must be (N, 2) (or (M, N, 2) for a batch), got {controls.shape}")
        self.scene.layout.check(x0, "initial state")
        if not np.all(np.isfinite(controls)):
            raise ValueError("controls contain NaN or infinite values")
        t0 = time.perf_counter()
        if coarse_chain is not None and (spec.kind != PARAREAL or coarse_chain.model.name != spec.coarse):
            raise ValueError(f"coarse_chain of the {coarse_chain.model.name!r} model given for {spec.name}")
        if spec.kind == PARAREAL:
            coarse_model = self.coarse_model(spec.coarse) if coarse_chain is None else coarse_chain.model
            solver = Parareal(self.scene, coarse_model, self.model(spec.fine))
            tol = self.tolerance if tolerance is None else tolerance
            try:
                r = solver.solve(x0, controls, dt, min(spec.iterations, controls.shape[1]), tol,
                                 keep_history=keep_history, variance_threshold=self.variance_threshold, stop=stop,
                                 coarse_chain=None if coarse_chain is None else coarse_chain.states)
            except PredictionAbandoned as e:
                self.fine_slices += e.slices
                raise
            done = replace(spec, iterations=r.iterations)
            pred = Prediction(r.states, done.name, r.iterations, r.position_change, r.yaw_change,
                              fine_slices=r.fine_slices, spec=done, history=r.history, variance=r.variance)
        else:
            m = self.model(spec.kind)
            variance = None
            fine = MODELS[spec.kind].role == FINE
            try:
                if isinstance(m, UncertainPropagator):
                    states, variance = rollout_with_variance(m, x0, controls, dt, stop=stop)
                else:
                    states = rollout(m, x0, controls, dt, stop=stop)
            except PredictionAbandoned as e:
                done = e.slices if fine else 0
                self.fine_slices += done
                raise PredictionAbandoned(done) from None
            fine_slices = controls.shape[0] * controls.shape[1] if fine else 0
            pred = Prediction(states, m.name, fine_slices=fine_slices, spec=spec, variance=variance)
        pred.wall_time = time.perf_counter() - t0
        self.fine_slices += pred.fine_slices
        self.trajectories += x0.shape[0]
        if single:
            pred.states = pred.states[0]
            pred.variance = None if pred.variance is None else pred.variance[0]
            pred.history = None if pred.history is None else [h[0] for h in pred.history]
        return pred
