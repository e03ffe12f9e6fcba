"""Interventions on a bridge: units and the edge graph, where a mask acts (sites), unit and edge masks, the
replacements (means, corrupted activations), resumed passes and the activation cache they read, and ablation."""
