"""The two federations a withdrawn site is removed from (``withdrawal_methods.py``'s
docstring describes them), shared by ``withdrawal_methods.py`` and
``equivalence_miss_rate.py``: the clients, the withdrawn site, the test and known sets,
the local recipe and the models retrained without the site (cached)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _common import unique_images, without
from _elimination_paper import RECIPE, USER_SIZE, cached_model, federation, split

from monai_forget.data import concat, load_mnist_test, load_pneumoniamnist
from monai_forget.fl.run import audit_recipe, mlp_config
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.unlearning.federaser import train_with_history
from monai_forget.unlearning.scenario import build_federation

FEDERATIONS = ("mnist-30", "pneumoniamnist-skew")
SKEW = (0.9, 0.3, 0.6)
WITHDRAWN_USERS = 2
# a seed whose retrained models' members were no more confident than never-seen data
NOT_MEASURABLE = "not measurable (no membership gap)"


def setting(name: str, seed: int, args: argparse.Namespace, loaded: dict) -> dict:
    """The federation ``name`` at ``seed``: clients, the withdrawn site, test and known sets,
    the local recipe, rounds and the auditor's reference-model recipe."""
    if name == "mnist-30":
        loaded.setdefault(name, load_mnist_test())
        s = split(loaded[name], seed)
        clients = {f"user-{u + 1:02d}": d for u, d in enumerate(s["users"])}
        rng = np.random.default_rng([seed, 53])
        chosen = sorted(rng.choice(len(clients), WITHDRAWN_USERS, replace=False))
        withdrawn = [list(clients)[u] for u in chosen]
        remaining = {n: d for n, d in clients.items() if n not in withdrawn}
        known = (concat(*remaining.values()), concat(s["held_out"], s["test"]))
        population = (len(known[0]) + len(known[1])) // 2
        refs = max(2, round(population * 0.5 / USER_SIZE))
        return {
            "clients": clients, "withdrawn": withdrawn, "test": s["test"], "known": known,
            "recipe": RECIPE, "rounds": args.rounds,
            "auditor": FedAvgShadowRecipe(RECIPE, clients=refs, rounds=args.rounds),
        }  # fmt: skip
    loaded.setdefault(name, load_pneumoniamnist("train"))
    fed = build_federation(loaded[name], per_client=200, label_skew=SKEW, seed=seed)
    config = replace(
        mlp_config(fed, seed=seed), network="forsaken_mnist_cnn", network_args={"num_classes": 2}
    )
    # never-seen images with the class mix of the site, and of the sites that stay
    references = {
        "withdrawn_reference": fed.calibration["site-1"],
        "members_reference": concat(*(d for n, d in fed.calibration.items() if n != "site-1")),
    }
    return {
        "clients": fed.clients, "withdrawn": ["site-1"], "test": fed.test,
        "references": references, "known": matched_known(fed, seed),
        "recipe": config.recipe(), "rounds": config.rounds, "auditor": audit_recipe(config),
    }  # fmt: skip


def matched_known(fed, seed: int) -> tuple:
    """The auditor's known sets with the withdrawn site's class mix: members drawn from the
    sites that stay (all their pneumonia images, normal ones to the site's share), the
    site's calibration set as non-members. With the stayers' own mix the auditor's shift
    check refuses (p < 1e-4): a mix of 90 % pneumonia is another source to it."""
    site = fed.clients["site-1"]
    # PneumoniaMNIST holds exact duplicates: no image in two roles
    pool = without(
        unique_images(concat(*(d for n, d in fed.clients.items() if n != "site-1"))), site
    )
    nonmembers = without(unique_images(fed.calibration["site-1"]), site, pool)
    share = float(np.mean(nonmembers.labels))
    ones, zeros = np.flatnonzero(pool.labels == 1), np.flatnonzero(pool.labels == 0)
    rng = np.random.default_rng([seed, 53])
    normal = rng.choice(zeros, round(len(ones) * (1 - share) / share), replace=False)
    return pool.subset(np.sort(np.concatenate([ones, normal]))), nonmembers


def retrain(clients: dict, recipe, rounds: int, seed: int, path: Path) -> torch.nn.Module:
    """FedAvg from a model seeded by ``seed`` (cached at ``path``)."""
    if recipe is RECIPE:
        return federation(list(clients.values()), seed, rounds, path)
    return trained_with_history(clients, recipe, rounds, seed, path)


def trained_with_history(
    clients: dict, recipe, rounds: int, seed: int, path: Path, joined: dict | None = None
) -> torch.nn.Module:
    """:func:`~monai_forget.unlearning.federaser.train_with_history`'s model (each client
    first training in its ``joined`` round), cached at ``path``."""
    return cached_model(
        path,
        recipe,
        seed,
        lambda model: model.load_state_dict(
            train_with_history(clients, recipe, rounds, seed=seed, joined=joined)[0].state_dict()
        ),
    )
