"""The truth suite: graphtool's facts about real models against what a real torch.compile logs."""
