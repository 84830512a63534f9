"""``recipes/train_contrastive_align.py`` under the name the model cards' used-by lines and older commands give: the same recipe, run
or imported (``accelerate launch recipes/align_contrastive.py --config ...`` runs ``train_contrastive_align.py``'s ``main``)."""

import pathlib
import runpy

# Not run as __main__ inside runpy: runpy.run_path sets sys.argv[0] to the file it runs, and the recipe's messages and
# suggested commands must name the script the user typed.
_recipe = runpy.run_path(
    str(pathlib.Path(__file__).with_name("train_contrastive_align.py")), run_name="train_contrastive_align"
)
globals().update({name: value for name, value in _recipe.items() if name == "__all__" or not name.startswith("__")})

if __name__ == "__main__":
    _recipe["cli"]()
