"""Invented paper metadata for the test corpus: titles, authors and abstracts drawn
from small word pools with a seeded RNG, so the corpus is reproducible and its text
exercises non-ASCII handling (accents, Cyrillic, CJK, Greek letters) everywhere a
crawler or an archive stores or hashes text."""

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass

LICENSES = (
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://creativecommons.org/licenses/by/4.0/",
    "http://creativecommons.org/licenses/by-sa/4.0/",
    "http://creativecommons.org/publicdomain/zero/1.0/",
)
CATEGORIES = (
    "cs.LG",
    "cs.CV",
    "cs.CL",
    "cs.DC",
    "cs.AI",
    "cs.CR",
    "stat.ML",
    "math.PR",
    "math.CO",
    "math.OC",
    "quant-ph",
    "hep-th",
    "cond-mat.stat-mech",
    "physics.optics",
    "q-bio.NC",
    "astro-ph.GA",
)
FIRST_NAMES = (
    "Jürgen",
    "Łukasz",
    "Влад",
    "Zoë",
    "José",
    "Søren",
    "Ana",
    "Priya",
    "Oluwaseun",
    "Mateus",
    "Aino",
    "Dmitrij",
    "Ingrid",
    "Kenji",
    "Fatima",
    "Håkon",
    "Chloé",
    "Nikolaï",
    "Ayşe",
    "Tomás",
)
LAST_NAMES = (
    "Müller",
    "Nowak",
    "Петров",
    "García",
    "Østergaard",
    "Kowalczyk",
    "Nakamura",
    "Çelik",
    "Dvořák",
    "Ó Briain",
    "Schmidhuber",
    "Lindqvist",
    "Nguyễn",
    "Żuraw",
    "Sørensen",
    "Ibáñez",
)
WHOLE_NAMES = ("張偉", "王芳", "李娜", "佐藤 健", "김민준", "Αλέξανδρος Παπαδόπουλος")
ADJECTIVES = (
    "Scalable",
    "Robust",
    "Sparse",
    "Naïve",
    "Provable",
    "Differentiable",
    "Über-parametrised",
    "Self-supervised",
    "Federated",
    "Quantum",
    "Stochastic",
    "Equivariant",
    "Causal",
    "Bayesian",
)
SUBJECTS = (
    "β-Variational Autoencoders",
    "Δ-Learning",
    "λ-Returns",
    "Schrödinger Bridges",
    "Erdős–Rényi Graphs",
    "Möbius Transformations",
    "Gödel Machines",
    "Kähler Manifolds",
    "Transformers",
    "Mini-batch SGD",
    "Graph Neural Networks",
    "Diffusion Models",
    "Ω(n log n) Sorting",
    "Poincaré Embeddings",
    "Mixture-of-Experts",
    "Contrastive Learning",
    "Cauchy–Schwarz Divergences",
    "Attention",
)
SETTINGS = (
    "Elastic Distributed Training",
    "Low-resource Languages",
    "Edge Devices",
    "Protein Folding",
    "Gravitational-wave Detection",
    "Photonic Circuits",
    "Galaxy Surveys",
    "Spiking Networks",
    "Multi-GPU Servers",
    "Café Recommendation",
    "Ångström-scale Microscopy",
    "Streaming Data",
)
PATTERNS = (
    "{adj} {subject} for {setting}",
    "On the Convergence of {subject} in {setting}",
    "{subject}: {adj} Methods for {setting}",
    "Rethinking {subject} — Lessons from {setting}",
    "When {subject} Meet {setting}",
)
SENTENCES = (
    "We study {subject} in the setting of {setting}.",
    "Our method is {adj_lower} and needs no tuning of the step size η.",
    "Experiments on {n} benchmarks show a {p}% improvement over strong baselines.",
    "We prove a bound of order O(√n) that holds with probability 1 − δ.",
    "The analysis extends to {subject} with heavy-tailed noise.",
    "Code and data are released under an open licence.",
)


@dataclass(frozen=True)
class Paper:
    """One paper (all its arXiv versions share it)."""

    arxiv_id: str
    submitted_at: str  # ISO 8601, second precision, Z
    title: str
    authors: tuple[str, ...]
    abstract: str
    primary_cat: str
    cross_cats: tuple[str, ...]
    license: str


def text_sha256(text: str) -> str:
    """The registry's ``title_canon_sha256`` / ``abstract_canon_sha256`` rule, as checked on
    the real bundles: SHA-256 of the lower-cased text with each stretch of whitespace made one space."""
    return hashlib.sha256(" ".join(text.split()).lower().encode("utf-8")).hexdigest()


def authors_text(authors: Iterable[str]) -> str:
    return ", ".join(authors)


def invent_paper(rng: random.Random, arxiv_id: str, submitted_at: str) -> Paper:
    words = {"adj": rng.choice(ADJECTIVES), "subject": rng.choice(SUBJECTS), "setting": rng.choice(SETTINGS)}
    title = rng.choice(PATTERNS).format(**words)
    authors = tuple(_author(rng) for _ in range(rng.randint(1, 6)))
    abstract = " ".join(
        rng.choice(SENTENCES).format(
            adj_lower=words["adj"].lower(), n=rng.randint(2, 40), p=rng.randint(1, 60), **words
        )
        for _ in range(rng.randint(3, 7))
    )
    primary = rng.choice(CATEGORIES)
    cross = tuple(sorted(set(rng.sample(CATEGORIES, rng.randint(0, 3))) - {primary}))
    return Paper(arxiv_id, submitted_at, title, authors, abstract, primary, cross, rng.choice(LICENSES))


def _author(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(WHOLE_NAMES)
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
