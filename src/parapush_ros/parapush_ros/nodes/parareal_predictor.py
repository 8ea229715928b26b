"""``parareal_predictor``: serves PredictTrajectory with any model (coarse, learned, fine, Parareal-K).

Every bad request is answered with ``success = false`` and a message naming the problem; the node keeps serving.
The latest prediction is published for RViz: a MarkerArray (one namespace per Parareal iterate) and the first
object's predicted path. Both topics are transient-local so RViz shows the last prediction when it connects.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from nav_msgs.msg import Path
from parapush_msgs.srv import PredictTrajectory
from rclpy.node import Node
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from ..ros import markers, qos
from ..ros.conversions import ConversionError, array_to_scene_state, controls_to_arrays, scene_state_to_array
from ..core.models.base import ModelDiverged
from ..core.models.registry import PARAREAL, ModelSpec, Predictor
from ..core.scene.spec import load_scene
from ..ros.params import PREDICTOR, declare_all
from ..ros.node import node_main



class PararealPredictorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("parareal_predictor", **kwargs)
        self.p = declare_all(self, PREDICTOR)
        self.scene = load_scene(self.p["scene"])
        try:
            self.predictor = Predictor.from_parameters(self.scene, self.p, iterations=self.p["max_iterations"],
                                                       tolerance=self.p["tolerance"])
        except ValueError as e:
            raise ValueError(f"parameter {e}") from None
        self.marker_pub = self.create_publisher(MarkerArray, "~/prediction_markers", qos.LATCHED)
        self.path_pub = self.create_publisher(Path, "~/predicted_path", qos.LATCHED)
        self.srv = self.create_service(PredictTrajectory, "predict_trajectory", self._on_predict)
        self.get_logger().info(f"serving predict_trajectory for scene {self.scene.name!r} "
                               f"({len(self.scene.objects)} object(s), default K={self.p['max_iterations']}, "
                               f"{self.predictor.fine.threads} fine threads)")

    def destroy_node(self):
        self.predictor.close()
        super().destroy_node()

    def _on_predict(self, req, res):
        t0 = time.perf_counter()
        try:
            res = self._predict(req, res)
        except (ConversionError, ValueError) as e:
            res.success, res.message = False, f"invalid request: {e}"
        except ModelDiverged as e:
            res.success, res.message = False, f"prediction failed: {e}"
        except Exception as e:  # noqa: BLE001 - the service must answer and stay up whatever happens
            self.get_logger().error(f"unexpected error: {e!r}")
            res.success, res.message = False, f"internal error: {e!r}"
        res.wall_time = time.perf_counter() - t0
        if not res.success:
            self.get_logger().warning(res.message)
        return res

    def _predict(self, req, res):
        x0 = scene_state_to_array(req.initial_state, self.scene)
        u, dt = controls_to_arrays(req.controls, self.p["max_speed"], self.p["max_slice_duration"])
        if len(u) > self.p["max_controls"]:
            raise ConversionError(f"controls: {len(u)} controls exceed max_controls = {self.p['max_controls']}")
        spec = ModelSpec.parse(req.model or PARAREAL, coarse=req.coarse_model or None)  # "parareal3" names K
        if not np.isfinite(req.tolerance):  # NaN is neither <= 0 (the default) nor a tolerance
            raise ConversionError(f"tolerance: {req.tolerance} is not finite")
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.p["frame_id"])
        tol = None
        if spec.kind == PARAREAL:
            K = spec.iterations or (req.max_iterations if req.max_iterations > 0 else
                                    min(self.p["max_iterations"], len(u)))
            if not 1 <= K <= len(u):
                raise ConversionError(f"max_iterations: {K} is out of range 1..{len(u)} (the number of controls)")
            spec = replace(spec, iterations=K)
            tol = req.tolerance if req.tolerance > 0 else self.p["tolerance"]
            if not np.isfinite(tol):
                raise ConversionError(f"tolerance: {req.tolerance} is not finite")
        pred = self.predictor.predict(x0, u, dt, model=spec, tolerance=tol,
                                      keep_history=spec.kind == PARAREAL and self.p["publish_iterations"])
        res.iterations = pred.iterations
        res.iteration_change = [float(c) for c in pred.position_change]
        res.predicted_states = [array_to_scene_state(s, self.scene, header) for s in pred.states[1:]]
        res.success = True
        res.message = f"{pred.model}: {len(u)} slices of {dt:g} s"
        self._publish(pred.states, pred.history, header)
        return res

    def _publish(self, states, history, header):
        ms = [markers.delete_all(header)] + markers.scene_markers(self.scene, header)
        if history:
            for k, h in enumerate(history[:-1]):
                ms += markers.trajectory_markers(self.scene, h, header, f"iteration_{k}", alpha=0.25, pusher=False)
        ms += markers.trajectory_markers(self.scene, states, header, "prediction")
        self.marker_pub.publish(markers.marker_array(ms))
        self.path_pub.publish(markers.object_path(self.scene, states, header))


main = node_main(PararealPredictorNode)
