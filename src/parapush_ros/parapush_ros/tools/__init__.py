"""The tools around the robot's runtime: benchmarks (``bench``), data generation and training
(``learning``), soaks, fidelity studies and demonstration recording. Nothing in ``core``,
``nodes`` or ``ros`` imports them; they need the tools' extra dependencies (plots, progress,
scikit-learn, Ray), which a robot install may leave out."""
