/// The values this module made before they moved to CofferModel stay visible to every file that imports it.
@_exported import CofferModel
