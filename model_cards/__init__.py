"""Model card templates (Markdown, YAML front matter, Jinja2 ``{{ field }}``), installed as ``bitext_hf.model_cards``.

The folder lives at the repository root for visibility; ``bitext_hf/model_cards`` is a symbolic link to it, which
setuptools follows when it builds wheels. Render a template with ``bitext_hf.hub.render_model_card(name, ...)``.
"""
