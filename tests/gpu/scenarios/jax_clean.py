# tests/gpu/scenarios/jax_clean.py — GPU scenario: a clean JAX program (library handles, no leak).
"""A clean JAX program: XLA's preallocation and cuBLAS handles live for the process; no leak."""
import jax.numpy as jnp

x = jnp.ones((2048, 2048))
print(float((x @ x).sum().block_until_ready()))
