"""A HANS-style generator (McCoy, Pavlick & Linzen 2019): templated NLI pairs that a model using the
lexical-overlap, subsequence or constituent heuristic gets wrong (non-entailed subcases) or right
(entailed subcases).

Every hypothesis is built only from words of its premise, so the three heuristics all predict
"entailment"; the label says whether that is true. Subcases carry HANS's own names (``ln_`` /
``le_`` lexical overlap non-entailed / entailed, ``sn_`` / ``se_`` subsequence, ``cn_`` / ``ce_``
constituent). The Heuristic Core paper (Table 1) focuses on four non-entailed ones:
SO-Swap, Prep, Embed-If and Embed-Verb. The vocabulary is small and written by hand; it is not
HANS's own, so accuracies are comparable in kind, not in number, to the real HANS.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import datasets

from heurlens.errors import HeurlensError

HANS_LABELS = ("entailment", "non-entailment")

# (singular, plural) people nouns, so that any noun can fill any agent or patient slot.
NOUNS = [("doctor", "doctors"), ("lawyer", "lawyers"), ("artist", "artists"), ("actor", "actors"),
         ("senator", "senators"), ("president", "presidents"), ("manager", "managers"),
         ("tourist", "tourists"), ("student", "students"), ("professor", "professors"),
         ("judge", "judges"), ("author", "authors"), ("athlete", "athletes"), ("banker", "bankers"),
         ("secretary", "secretaries"), ("scientist", "scientists")]
# (past tense, past participle) of transitive verbs taking a person as object.
TRANSITIVE = [("advised", "advised"), ("saw", "seen"), ("helped", "helped"),
              ("mentioned", "mentioned"), ("supported", "supported"), ("thanked", "thanked"),
              ("recommended", "recommended"), ("called", "called"), ("admired", "admired"),
              ("avoided", "avoided"), ("contacted", "contacted"), ("introduced", "introduced"),
              ("encouraged", "encouraged"), ("stopped", "stopped"), ("paid", "paid")]
INTRANSITIVE = ["slept", "ran", "danced", "shouted", "resigned", "waited", "performed", "laughed",
                "arrived", "smiled"]
PREPOSITIONS = ["near", "behind", "beside", "by", "next to", "in front of"]
LOCATIONS = ["office", "school", "library", "museum", "park", "hospital"]
# Verbs whose clausal complement is not entailed / is entailed (factive).
NONFACTIVE = ["believed", "thought", "hoped", "assumed", "suspected", "claimed"]
FACTIVE = ["knew", "forgot", "learned", "remembered", "realized", "noticed"]
# Verbs that take a noun phrase or a clause (NP/S ambiguity), and that may drop their object (NP/Z).
NP_OR_CLAUSE = ["knew", "believed", "heard", "forgot", "remembered", "understood"]
OPTIONAL_OBJECT_PEOPLE = ["hid", "left", "paid", "called", "helped", "visited", "watched"]
NONVERIDICAL_ADVERBS = ["probably", "supposedly", "hopefully", "maybe", "allegedly"]
VERIDICAL_ADVERBS = ["certainly", "definitely", "clearly", "obviously", "undoubtedly"]
ADJECTIVES = ["happy", "tall", "young", "old", "smart", "famous", "rich", "angry"]
# Verbs whose object can be dropped ("The author read the book." => "The author read."), with objects.
UNDERSTOOD_OBJECT = {"read": ["book", "letter", "report", "poem", "story"],
                     "wrote": ["book", "letter", "report", "poem", "story"],
                     "ate": ["sandwich", "apple", "cake", "soup", "salad"],
                     "cooked": ["meal", "soup", "dinner", "pasta", "rice"],
                     "painted": ["picture", "house", "wall", "fence", "portrait"],
                     "sang": ["song", "anthem", "hymn", "ballad", "tune"],
                     "drew": ["map", "picture", "portrait", "plan", "diagram"],
                     "studied": ["report", "map", "book", "plan", "lesson"]}

#: The Heuristic Core paper's abbreviations (Heuristic Core paper, Table 1) of the four subcases it focuses on.
FOCUS_SUBCASES = {"SO-Swap": "ln_subject/object_swap", "Prep": "ln_preposition",
                  "Embed-If": "cn_embedded_under_if", "Embed-Verb": "cn_embedded_under_verb"}

# (subcase, heuristic, label, premise template, hypothesis template). Placeholders (see _draw_slots):
# N0-N3 distinct noun phrases ("the doctor(s)"), PL0 bare plural of N0's noun, BE0 was/were for N0,
# V/V2 distinct transitive verbs in the past, VAMB a verb whose past is its participle (so that
# passives keep full lexical overlap), I/I2 distinct intransitive verbs, P preposition, LOC place, IF if/unless, SINCE
# since/because, SUB since/because/although, NONFACT/FACT (non-)factive verbs, NPS an NP-or-clause
# verb, OPT a verb with an optional person object, ADVN/ADVE non-veridical/veridical adverbs, ADJ an
# adjective, UV/UOBJ a verb with an optional object and its object.
_TABLE = [
    ("ln_subject/object_swap", "lexical_overlap", "non-entailment", "{N0} {V} {N1}", "{N1} {V} {N0}"),
    ("ln_preposition", "lexical_overlap", "non-entailment", "{N0} {P} {N1} {V} {N2}", "{N2} {V} {N1}"),
    ("ln_relative_clause", "lexical_overlap", "non-entailment", "{N0} who {N1} {V} {V2} {N2}", "{N1} {V2} {N2}"),
    ("ln_passive", "lexical_overlap", "non-entailment", "{N0} {BE0} {VAMB} by {N1}", "{N0} {VAMB} {N1}"),
    ("ln_conjunction", "lexical_overlap", "non-entailment", "{N0} {V} {N1} and {N2}", "{N1} {V} {N2}"),
    ("le_relative_clause", "lexical_overlap", "entailment", "{N0} who {N1} {V} {V2} {N2}", "{N1} {V} {N0}"),
    ("le_around_prepositional_phrase", "lexical_overlap", "entailment", "{N0} {P} {N1} {V} {N2}", "{N0} {V} {N2}"),
    ("le_around_relative_clause", "lexical_overlap", "entailment", "{N0} who {N1} {V} {V2} {N2}", "{N0} {V2} {N2}"),
    ("le_conjunction", "lexical_overlap", "entailment", "{N0} {V} {N1} and {N2}", "{N0} {V} {N2}"),
    ("le_passive", "lexical_overlap", "entailment", "{N0} {BE0} {VAMB} by {N1}", "{N1} {VAMB} {N0}"),
    ("sn_NP/S", "subsequence", "non-entailment", "{N0} {NPS} {N1} {V} {N2}", "{N0} {NPS} {N1}"),
    ("sn_PP_on_subject", "subsequence", "non-entailment", "{N0} {P} {N1} {I}", "{N1} {I}"),
    ("sn_relative_clause_on_subject", "subsequence", "non-entailment", "{N0} who {V} {N1} {V2} {N2}", "{N1} {V2} {N2}"),
    ("sn_past_participle", "subsequence", "non-entailment", "{N0} {VAMB} in the {LOC} {I}", "{N0} {VAMB} in the {LOC}"),
    ("sn_NP/Z", "subsequence", "non-entailment", "{SUB} {N0} {OPT} {N1} {V} {N2}", "{N0} {OPT} {N1}"),
    ("se_conjunction", "subsequence", "entailment", "{N0} and {N1} {V} {N2}", "{N1} {V} {N2}"),
    ("se_adjective", "subsequence", "entailment", "{ADJ} {PL0} {V} {N1}", "{PL0} {V} {N1}"),
    ("se_understood_object", "subsequence", "entailment", "{N0} {UV} the {UOBJ}", "{N0} {UV}"),
    ("se_relative_clause_on_obj", "subsequence", "entailment", "{N0} {V} {N1} who {V2} {N2}", "{N0} {V} {N1}"),
    ("se_PP_on_obj", "subsequence", "entailment", "{N0} {V} {N1} {P} {N2}", "{N0} {V} {N1}"),
    ("cn_embedded_under_if", "constituent", "non-entailment", "{IF} {N0} {I}, {N1} {I2}", "{N0} {I}"),
    ("cn_after_if_clause", "constituent", "non-entailment", "{IF} {N0} {V} {N1}, {N2} {I}", "{N2} {I}"),
    ("cn_embedded_under_verb", "constituent", "non-entailment", "{N0} {NONFACT} that {N1} {I}", "{N1} {I}"),
    ("cn_disjunction", "constituent", "non-entailment", "{N0} {I}, or {N1} {V} {N2}", "{N0} {I}"),
    ("cn_adverb", "constituent", "non-entailment", "{ADVN} {N0} {V} {N1}", "{N0} {V} {N1}"),
    ("ce_embedded_under_since", "constituent", "entailment", "{SINCE} {N0} {V} {N1}, {N2} {I}", "{N0} {V} {N1}"),
    ("ce_after_since_clause", "constituent", "entailment", "{SINCE} {N0} {I}, {N1} {V} {N2}", "{N1} {V} {N2}"),
    ("ce_embedded_under_verb", "constituent", "entailment", "{N0} {FACT} that {N1} {I}", "{N1} {I}"),
    ("ce_conjunction", "constituent", "entailment", "{N0} {I}, and {N1} {V} {N2}", "{N0} {I}"),
    ("ce_adverb", "constituent", "entailment", "{ADVE} {N0} {V} {N1}", "{N0} {V} {N1}"),
]


@dataclass(frozen=True)
class Subcase:
    name: str  # HANS's subcase name, e.g. "ln_subject/object_swap"
    heuristic: str  # lexical_overlap | subsequence | constituent
    label: str  # entailment | non-entailment
    premise: str  # template
    hypothesis: str  # template


SUBCASES: dict[str, Subcase] = {row[0]: Subcase(*row) for row in _TABLE}


def _draw_slots(rng: random.Random) -> dict[str, str]:
    """One random filling of every placeholder, with distinct nouns and distinct verbs."""
    nouns = rng.sample(NOUNS, 4)
    plural = [rng.random() < 0.5 for _ in nouns]
    (v, _), (v2, _) = rng.sample(TRANSITIVE, 2)
    i, i2 = rng.sample(INTRANSITIVE, 2)
    uv = rng.choice(list(UNDERSTOOD_OBJECT))
    slots = {f"N{k}": f"the {pl if p else sg}" for k, ((sg, pl), p) in enumerate(zip(nouns, plural))}
    slots.update(
        PL0=nouns[0][1], BE0="were" if plural[0] else "was", V=v, V2=v2,
        VAMB=rng.choice([past for past, participle in TRANSITIVE if past == participle]),
        I=i, I2=i2, P=rng.choice(PREPOSITIONS), LOC=rng.choice(LOCATIONS),
        IF=rng.choice(["if", "unless"]), SINCE=rng.choice(["since", "because"]),
        SUB=rng.choice(["since", "because", "although"]), NONFACT=rng.choice(NONFACTIVE),
        FACT=rng.choice(FACTIVE), NPS=rng.choice(NP_OR_CLAUSE), OPT=rng.choice(OPTIONAL_OBJECT_PEOPLE),
        ADVN=rng.choice(NONVERIDICAL_ADVERBS), ADVE=rng.choice(VERIDICAL_ADVERBS),
        ADJ=rng.choice(ADJECTIVES), UV=uv, UOBJ=rng.choice(UNDERSTOOD_OBJECT[uv]))
    return slots


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def resolve_subcases(names: list[str] | None) -> list[str]:
    """Subcase names from HANS names or the paper's abbreviations (SO-Swap...); None means all 30."""
    if names is None:
        return list(SUBCASES)
    resolved = []
    for name in names:
        full = FOCUS_SUBCASES.get(name, name)
        if full not in SUBCASES:
            raise HeurlensError(
                f"unknown HANS subcase {name!r}; use one of {', '.join(SUBCASES)} "
                f"or an abbreviation {', '.join(FOCUS_SUBCASES)}")
        resolved.append(full)
    return resolved


MAX_REPEATS = 2000  # consecutive repeated draws after which a subcase's distinct pairs count as used up


def generate_hans(n_per_subcase: int = 1000, subcases: list[str] | None = None, seed: int = 0) -> datasets.Dataset:
    """Distinct templated pairs per subcase (1,000 by default, as HANS and the paper), same seed => same data.

    Columns: premise, hypothesis, label (ClassLabel entailment/non-entailment), heuristic, subcase.

    Args:
        n_per_subcase: pairs per subcase.
        subcases: which subcases (None: all 30).
        seed: the templates' fillers' seed.

    Returns:
        A Dataset (premise, hypothesis, label, heuristic, subcase).
    """
    if isinstance(n_per_subcase, bool) or not isinstance(n_per_subcase, int) or n_per_subcase < 1:
        raise HeurlensError(f"n_per_subcase = {n_per_subcase!r}: give a whole number of pairs, at least 1")
    rows = []
    for name in resolve_subcases(subcases):
        case = SUBCASES[name]
        rng = random.Random(f"{seed}/{name}")
        seen: set[tuple[str, str]] = set()
        repeats = 0  # draws in a row that gave a pair already seen: many mean the subcase's pairs are used up
        while len(seen) < n_per_subcase:
            slots = _draw_slots(rng)
            pair = (_sentence(case.premise.format(**slots)), _sentence(case.hypothesis.format(**slots)))
            if pair in seen:
                repeats += 1
                if repeats > MAX_REPEATS:
                    raise HeurlensError(f"the HANS-style vocabulary gives about {len(seen)} distinct {name} pairs, not "
                                        f"{n_per_subcase}; ask for at most {len(seen)} per subcase (n_per_subcase=)")
                continue
            repeats = 0
            seen.add(pair)
            rows.append({"premise": pair[0], "hypothesis": pair[1], "label": HANS_LABELS.index(case.label),
                         "heuristic": case.heuristic, "subcase": name})
    features = datasets.Features({
        "premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
        "label": datasets.ClassLabel(names=list(HANS_LABELS)),
        "heuristic": datasets.Value("string"), "subcase": datasets.Value("string")})
    return datasets.Dataset.from_list(rows, features=features)
