"""Circuit discovery and MIB's yardstick, in one room: attribution patching (EAP, EAP-IG) and its run folders, MIB's
graph and files, faithfulness curves and their areas (CPR, CMD), the comparison of methods, and circuit drawings.
Every method gives a ``heurlens.interventions.rankings.Ranking``; masks (``heurlens.pruning``) give theirs through
``ranking_of``. Names are imported on first use (``heurlens.runtime.lazy``)."""

from typing import TYPE_CHECKING

from heurlens.runtime.lazy import lazy_exports

_EXPORTS = {"attribution_ranking": ".attribution", "attribution_scores": ".attribution",
            "edge_attribution_scores": ".attribution", "attribution_circuits": ".attribution",
            "attribute": ".attribution_runs", "load_attribution": ".attribution_runs",
            "AttributionRun": ".attribution_runs", "compare_runs": ".comparison", "circuit_figure": ".drawing",
            "faithfulness_curve": ".faithfulness", "ranking_curve": ".faithfulness", "keep_mask_curve": ".faithfulness",
            "faithfulness_figure": ".drawing", "FaithfulnessCurve": ".faithfulness_areas",
            "MIB_GRID": ".faithfulness_areas", "MibGraph": ".mib_graph", "MibFile": ".mib_files",
            "read_mib_file": ".mib_files", "write_mib_file": ".mib_files", "AttributionSettings": ".settings",
            "FaithfulnessSettings": ".settings"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the lazy names' real types, for type checkers and editors (never run)
    from heurlens.circuits.attribution import attribution_circuits as attribution_circuits
    from heurlens.circuits.attribution import attribution_ranking as attribution_ranking
    from heurlens.circuits.attribution import attribution_scores as attribution_scores
    from heurlens.circuits.attribution import edge_attribution_scores as edge_attribution_scores
    from heurlens.circuits.attribution_runs import AttributionRun as AttributionRun
    from heurlens.circuits.attribution_runs import attribute as attribute
    from heurlens.circuits.attribution_runs import load_attribution as load_attribution
    from heurlens.circuits.comparison import compare_runs as compare_runs
    from heurlens.circuits.drawing import circuit_figure as circuit_figure
    from heurlens.circuits.drawing import faithfulness_figure as faithfulness_figure
    from heurlens.circuits.faithfulness import faithfulness_curve as faithfulness_curve
    from heurlens.circuits.faithfulness import keep_mask_curve as keep_mask_curve
    from heurlens.circuits.faithfulness import ranking_curve as ranking_curve
    from heurlens.circuits.faithfulness_areas import MIB_GRID as MIB_GRID
    from heurlens.circuits.faithfulness_areas import FaithfulnessCurve as FaithfulnessCurve
    from heurlens.circuits.mib_files import MibFile as MibFile
    from heurlens.circuits.mib_files import read_mib_file as read_mib_file
    from heurlens.circuits.mib_files import write_mib_file as write_mib_file
    from heurlens.circuits.mib_graph import MibGraph as MibGraph
    from heurlens.circuits.settings import AttributionSettings as AttributionSettings
    from heurlens.circuits.settings import FaithfulnessSettings as FaithfulnessSettings
