"""16-class ImageNet (Geirhos et al. 2019), the label set of the Subtask Induction paper's vision experiments.

Each of the 16 categories is a WordNet noun synset; an ImageNet class belongs to a category when
the category is the class's synset or one of its hypernyms (WordNet 3.0, which ImageNet's ``n...``
ids index). Geirhos et al. built their category lists from the same hierarchy and then removed a
few classes by hand, so their lists are a subset of these; compare before mixing results.

WordNet 3.0 comes from Debian's ``wordnet-base`` package (``/usr/share/wordnet/data.noun``) or any
folder holding ``data.noun``; ImageNet's 1,000 class ids ship with timm.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from heurlens.errors import HeurlensError

DEBIAN_WORDNET = Path("/usr/share/wordnet")

# category -> WordNet 3.0 noun synset offset
GEIRHOS_CATEGORIES = {
    "airplane": "02691156", "bear": "02131653", "bicycle": "02834778", "bird": "01503061",
    "boat": "02858304", "bottle": "02876657", "car": "02958343", "cat": "02121808",
    "chair": "03001627", "clock": "03046257", "dog": "02084071", "elephant": "02503517",
    "keyboard": "03614007", "knife": "03623556", "oven": "03862676", "truck": "04490091",
}
_CATEGORY_OF_OFFSET = {offset: name for name, offset in GEIRHOS_CATEGORIES.items()}


@cache
def noun_hypernyms(wordnet_dir: Path = DEBIAN_WORDNET) -> dict[str, list[str]]:
    """Every noun synset offset -> the offsets of its hypernyms (``@``) and instance hypernyms (``@i``)."""
    path = Path(wordnet_dir) / "data.noun"
    if not path.is_file():
        raise HeurlensError(f"WordNet not found ({path} is missing): install Debian's wordnet-base "
                            "(sudo apt-get install wordnet-base) or pass wordnet_dir= a folder with data.noun")
    parents: dict[str, list[str]] = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):  # the licence header
            continue
        fields = line.split(" ")
        n_words = int(fields[3], 16)
        at = 4 + 2 * n_words
        n_pointers = int(fields[at])
        pointers = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(n_pointers)]
        parents[fields[0]] = [offset for symbol, offset, pos, _ in pointers if symbol in ("@", "@i") and pos == "n"]
    return parents


def category_of(wnid: str, wordnet_dir: Path = DEBIAN_WORDNET) -> str | None:
    """The Geirhos category of an ImageNet class id (``n02099601``), or None if it has none."""
    parents = noun_hypernyms(Path(wordnet_dir))
    frontier, seen = [wnid.lstrip("n")], set()
    while frontier:
        offset = frontier.pop()
        if offset in _CATEGORY_OF_OFFSET:
            return _CATEGORY_OF_OFFSET[offset]
        if offset not in seen:
            seen.add(offset)
            frontier += parents.get(offset, [])
    return None


def imagenet_to_16_class(wordnet_dir: Path = DEBIAN_WORDNET) -> dict[int, str]:
    """ImageNet-1k class index (0-999, the usual order) -> Geirhos category, for classes that have one."""
    from timm.data import ImageNetInfo

    info = ImageNetInfo()
    mapping = {}
    for index in range(info.num_classes()):
        category = category_of(info.index_to_label_name(index), wordnet_dir)
        if category is not None:
            mapping[index] = category
    return mapping
