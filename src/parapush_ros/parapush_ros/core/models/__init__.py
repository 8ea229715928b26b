"""Predictive models of pushing: MuJoCo fine model, analytical and learned coarse models, Parareal, the registry."""
