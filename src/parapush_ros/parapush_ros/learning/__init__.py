"""Data generation and training of the learned coarse model (``parapush datagen``, ``parapush train``).

``datagen`` needs only MuJoCo; ``train`` imports torch when it runs. The model itself is ``core/models/learned.py``.
"""
