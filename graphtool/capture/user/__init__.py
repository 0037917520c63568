"""The user's code: importing the script and finding its model and inputs (:mod:`.script`), ``--device``
(:mod:`.devices`), the inputs' names as the forward names them (:mod:`.input_names`), and the one boundary
every call into the code crosses: its exceptions (:mod:`.boundary`) and ``--timeout`` (:mod:`.deadline`)."""
