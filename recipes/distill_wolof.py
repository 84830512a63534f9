"""``recipes/train_laser3.py`` under the name the model cards' used-by lines and older commands give: the same recipe, run
or imported (``accelerate launch recipes/distill_wolof.py --config ...`` runs ``train_laser3.py``'s ``main``)."""

import pathlib
import runpy

_recipe = runpy.run_path(str(pathlib.Path(__file__).with_name("train_laser3.py")), run_name=__name__)
globals().update({name: value for name, value in _recipe.items() if name == "__all__" or not name.startswith("__")})
