"""The demo sweep: an MLP on scikit-learn's digits, 30 Optuna trials (TPE, Hyperband, SQLite).

Run it with ``python -m examples.digits`` (the same as ``hpsearch run examples/digits/sweep.yaml``);
``sweep_ray.yaml`` and ``sweep_sigopt.yaml`` are the same sweep on Ray Tune (ASHA) and SigOpt lite.
"""
